"""Command-line parsing shared by every subcommand: negative vectors, serve's options."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

import parvox.cli as cli

NEGATIVE_VALUES = ["-0.6,0.8,0", "-1,-2,-3", "-1e-3", "-.5, 2", "-inf,1,2", "-3"]


def _one_value_options() -> list[tuple[str, argparse.ArgumentParser, argparse.Action]]:
    """(subcommand, its parser, option) for every option of every subcommand taking a value."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for name, p in sub.choices.items():
        for action in p._actions:
            if (action.option_strings and action.nargs is None and action.type in (None, str)
                    and action.choices is None):
                out.append((name, p, action))
    return out


OPTIONS = _one_value_options()


def test_the_vector_options_are_among_them():
    got = {(name, a.option_strings[-1]) for name, _, a in OPTIONS}
    want = {("slice", f"--{k}") for k in ("center", "u", "v", "normal", "up", "size")}
    want |= {("phantom", "--shape"), ("phantom", "--extent"), ("phantom", "--spacing"),
             ("ingest", "--extent"), ("ingest", "--spacing"), ("ingest", "--offsets")}
    assert want <= got


@pytest.mark.parametrize(
    ("name", "parser", "action"), OPTIONS, ids=[f"{n}{a.option_strings[-1]}" for n, _, a in OPTIONS]
)
@pytest.mark.parametrize("value", NEGATIVE_VALUES)
def test_every_value_option_takes_a_leading_minus_with_and_without_equals(
    name, parser, action, value
):
    others = []  # the other required arguments, with harmless values
    for a in parser._actions:
        if a is not action and not a.option_strings:
            others.append("x")
        elif a is not action and a.required:
            others += [a.option_strings[0], "1"]
    for flag in action.option_strings:
        for argv in ([flag, value], [f"{flag}={value}"]):
            ns, rest = parser.parse_known_args([*others, *argv])
            assert getattr(ns, action.dest) == value, (name, argv)
            assert rest == []


def test_a_negative_value_is_not_taken_for_an_option_nor_after_double_dash():
    p = cli._Parser(prog="t")
    p.add_argument("--u")
    p.add_argument("--flag", action="store_true")
    p.add_argument("rest", nargs="*")
    assert p.parse_args(["--u", "-1,2,3", "--flag"]).u == "-1,2,3"
    assert p.parse_args(["--u", "-1,2,3", "--", "--u", "-4,5,6"]).rest == ["--u", "-4,5,6"]
    assert p.parse_args(["--u", "-1,2,3"]).flag is False
    with pytest.raises(SystemExit):  # a real option after --u is still an option
        p.parse_args(["--u", "--flag"])
    assert p.parse_args(["--u", "-1,2,3"]).u == p.parse_args(["--u=-1,2,3"]).u
    assert p.parse_args(["--fl", "--u", "-1,2,3"]).flag  # abbreviations keep working


def test_slice_with_negative_vectors_equals_the_reference(tmp_path, capsys):
    from parvox.slicing import Plane, reference_slice
    from parvox.volume import phantom

    store = tmp_path / "s"
    assert cli.main(["phantom", str(store), "--shape", "23,26,29", "--disks", "2",
                     "--extent", "5,7,6", "--spacing", "2,1,1", "--no-progress"]) == 0
    vol = phantom((23, 26, 29))
    cases = [
        (["--u", "-0.6,0.8,0", "--v", "0,0,-1"],
         Plane((11, 12, 13.5), (-0.6, 0.8, 0), (0, 0, -1), (9, 11), spacing=(2, 1, 1))),
        (["--normal=0,-1,0", "--up=-1,0,0"],
         Plane.from_normal((11, 12, 13.5), (0, -1, 0), (9, 11), up=(-1, 0, 0),
                           spacing=(2, 1, 1))),
    ]
    for k, (vectors, plane) in enumerate(cases):
        out = tmp_path / f"o{k}.npy"
        assert cli.main(["slice", str(store), "--center", "11,12,13.5", *vectors,
                         "--size", "9,11", "-o", str(out)]) == 0
        np.testing.assert_allclose(np.load(out), reference_slice(vol, plane), rtol=1e-5, atol=1e-4)
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "flag", "words"),
    [
        (["phantom", "{tmp}/p.npy", "--shape", "-1,2,3"], "--shape", ">= 1"),
        (["phantom", "{tmp}/p.npy", "--shape", "4,4,4", "--spacing", "-1,1,1"], "--spacing", "> 0"),
        (["slice", "{tmp}", "--center", "1,2,3", "--u", "-1,0,0", "--v", "2,0,0", "--size",
          "4,4", "-o", "{tmp}/o.npy"], "--u/--v", "parallel"),
        (["slice", "{tmp}", "--center", "1,2,3", "--u", "-1,0,0", "--v", "0,1,0", "--up",
          "-1,0,0", "--size", "4,4", "-o", "{tmp}/o.npy"], "--up", "with normal"),
        (["slice", "{tmp}", "--center", "1,2,3", "--normal", "-1,0,0", "--size", "-4,4",
          "-o", "{tmp}/o.npy"], "--size", "[1,"),
        (["serve", "{tmp}", "--port", "70000"], "--port", "65535"),
        (["serve", "{tmp}", "--window", "0"], "--window", ">= 1"),
        (["serve", "{tmp}", "--dead-after", "-1"], "--dead-after", "> 0"),
        (["serve", "{tmp}", "--cache-mb", "-1e-3"], "--cache-mb", ">= 0"),
        (["serve", "{tmp}", "--front-share", "-0.5"], "--front-share", "[0, 1]"),
        (["serve", "{tmp}", "--front-share", "nan"], "--front-share", "[0, 1]"),
        (["serve", "{tmp}", "--config", "{tmp}/none.toml"], "--config", "no such file"),
    ],
)
def test_bad_values_name_the_option_not_an_argparse_confusion(
    tmp_path, capsys, argv, flag, words
):
    (tmp_path / "volume.json").write_text("{}")  # enough for the serve checks
    with pytest.raises(SystemExit) as info:
        cli.main([a.format(tmp=tmp_path) for a in argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"argument {flag}:" in err and words in err, err
    assert "expected one argument" not in err


def test_usage_error_is_a_parameter_error_that_pickles():
    import pickle

    from parvox.errors import ParameterError

    exc = cli.UsageError("--map", "cannot read m.toml")
    assert isinstance(exc, ParameterError) and exc.param == exc.argument == "--map"
    back = pickle.loads(pickle.dumps(exc))
    assert str(back) == str(exc) == "argument --map: cannot read m.toml"
    assert back.argument == "--map"
