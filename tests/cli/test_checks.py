"""Every subcommand checks its inputs and outputs before any work, reports what it did, and
names itself and the argument at fault; ``--help`` shows every default."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import scipy.ndimage as ndi

import parvox.cli as cli
from parvox.io import read_image, write_image

from ._helpers import refused


def _run(argv, capsys):
    code = cli.main([str(a) for a in argv])
    return code, capsys.readouterr().out


_refused = refused


def _no_work(monkeypatch, *names):
    """Make the named ``module:function`` fail if anything calls it."""
    import importlib

    for name in names:
        module, func = name.split(":")

        def boom(*args, _name=name, **kwargs):
            raise AssertionError(f"{_name} ran although the command line was bad")

        monkeypatch.setattr(importlib.import_module(module), func, boom)


# ---------------------------------------------------------------- outputs, before any work
def test_fft_to_png_is_refused_before_the_transform_naming_out(tmp_path, capsys, monkeypatch):
    _no_work(monkeypatch, "parvox.fft:irfftn", "parvox.fft:rfftn", "parvox.io:read_distributed",
             "parvox.io:read")
    np.save(tmp_path / "spec.npy", np.fft.rfftn(np.ones((6, 5, 8))))
    line = _refused(["fft", tmp_path / "spec.npy", tmp_path / "x.png", "--real", "--inverse"],
                    capsys)
    assert line.startswith("parvox fft: error: argument OUT: ") and "float64" in line
    line = _refused(["fft", tmp_path / "spec.npy", tmp_path / "x.png"], capsys)
    assert line.startswith("parvox fft: error: argument OUT: ") and "complex128" in line
    assert not (tmp_path / "x.png").exists()


def test_filter_checks_what_png_can_hold_before_filtering(tmp_path, capsys, monkeypatch):
    _no_work(monkeypatch, "parvox.io:read_distributed", "parvox.io:read")
    np.save(tmp_path / "v.npy", np.zeros((4, 5, 6), np.uint8))  # 3-D: no PNG
    line = _refused(["filter", tmp_path / "v.npy", tmp_path / "o.png", "--op", "median"], capsys)
    assert "argument OUT" in line and "(y, x)" in line


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["fft", "{t}/in.npy", "{t}/missing/o.npy"], "OUT"),
        (["filter", "{t}/in.npy", "{t}/missing/o.npy", "--op", "median"], "OUT"),
        (["label", "{t}/in.npy", "{t}/missing/o.npy"], "OUT"),
        (["ingest", "{t}/in.npy", "{t}/missing/s.store", "--disks", "2"], "STORE"),
        (["ingest", "{t}/in.npy", "{t}/s.store", "--disks", "1", "--disk-dirs", "{t}/missing/d"],
         "--disk-dirs"),
        (["export", "{t}/store", "{t}/missing/x.ome.zarr"], "OUT"),
        (["phantom", "{t}/missing/p.npy", "--shape", "4,4,4"], "OUT"),
        (["phantom", "{t}/missing/p.store", "--shape", "4,4,4"], "OUT"),
        (["slice", "{t}/store", "--center", "2,2,2", "--normal", "1,0,0", "--size", "3,3",
          "-o", "{t}/missing/s.png"], "-o/--output"),
        (["trace", "-o", "{t}/missing/e.npy"], "-o/--output"),
        (["composite", "{t}/rgba.npy", "{t}/missing/c.npy", "--k", "2"], "OUT.npy"),
        (["recon", "simulate", "{t}/missing/scan", "--phantom", "iec", "--counts", "10"], "OUT"),
        (["demo", "--out", "{t}/missing/pngs"], "--out"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else None,
)
def test_a_missing_parent_directory_is_refused_never_created(tmp_path, capsys, argv, argument):
    np.save(tmp_path / "in.npy", np.zeros((5, 6, 7), np.uint8))
    np.save(tmp_path / "rgba.npy", np.zeros((2, 3, 4, 4), np.float32))
    assert _run(["phantom", tmp_path / "store", "--shape", "5,6,7", "--no-progress"],
                capsys)[0] == 0
    line = _refused([a.format(t=tmp_path) for a in argv], capsys)
    assert line.startswith(f"parvox {' '.join(argv[:2]) if argv[0] == 'recon' else argv[0]}: "
                           f"error: argument {argument}: "), line
    assert "does not exist" in line
    assert not (tmp_path / "missing").exists()


def test_an_existing_output_needs_overwrite(tmp_path, capsys):
    np.save(tmp_path / "in.npy", np.zeros((5, 6, 7), np.uint8))
    (tmp_path / "s.store").mkdir()
    line = _refused(["ingest", tmp_path / "in.npy", tmp_path / "s.store", "--disks", "1"], capsys)
    assert "argument STORE" in line and "--overwrite" in line
    (tmp_path / "f").write_text("")
    line = _refused(["phantom", tmp_path / "f", "--shape", "4,4,4", "--overwrite"], capsys)
    assert "argument OUT" in line and "not a directory" in line


# ---------------------------------------------------------------- label's input
def test_label_refuses_a_colour_png_before_any_work(tmp_path, capsys, monkeypatch):
    _no_work(monkeypatch, "parvox.io:read_distributed", "parvox.io:read",
             "parvox.ndimage:label")
    write_image(tmp_path / "rgb.png", np.zeros((9, 7, 3), np.uint8))
    line = _refused(["label", tmp_path / "rgb.png", tmp_path / "o.png"], capsys)
    assert line.startswith("parvox label: error: argument IN: ") and "colour" in line
    np.save(tmp_path / "v.npy", np.zeros((4, 5, 6), np.uint8))
    line = _refused(["label", tmp_path / "v.npy", tmp_path / "o.png"], capsys)
    assert "argument OUT" in line  # 3-D labels cannot be a PNG


GREY = (ndi.gaussian_filter(np.random.default_rng(3).random((41, 37)), 2) * 255).astype(np.uint8)


def test_label_of_a_grey_image_says_how_it_was_thresholded(tmp_path, capsys):
    write_image(tmp_path / "g.png", GREY)
    code, out = _run(["label", tmp_path / "g.png", tmp_path / "o.npy"], capsys)
    want, n = ndi.label(GREY)
    assert code == 0 and n == 1 and np.array_equal(np.load(tmp_path / "o.npy"), want)
    lo, hi = int(GREY.min()), int(GREY.max())
    assert f"parvox label: IN is not binary (values {lo}..{hi})" in out
    assert "--threshold" in out and out.strip().endswith("parvox label: 1 component")


def test_label_threshold(tmp_path, capsys):
    write_image(tmp_path / "g.png", GREY)
    t = float(np.median(GREY))
    code, out = _run(["label", tmp_path / "g.png", tmp_path / "o.npy", "--threshold", t], capsys)
    want, n = ndi.label(GREY > t)
    assert code == 0 and n > 1 and np.array_equal(np.load(tmp_path / "o.npy"), want)
    assert out.strip() == f"parvox label: {n} components (foreground: values > {t:g})"


def test_label_of_a_binary_image_prints_no_note(tmp_path, capsys):
    write_image(tmp_path / "m.png", (GREY > 120).astype(np.uint8) * 255)
    code, out = _run(["label", tmp_path / "m.png", tmp_path / "o.png"], capsys)
    n = ndi.label(GREY > 120)[1]
    assert code == 0 and out.strip() == f"parvox label: {n} component{'s' * (n != 1)}"
    assert np.array_equal(read_image(tmp_path / "o.png"), ndi.label(GREY > 120)[0])


# ---------------------------------------------------------------- what a command did
def test_filter_prints_one_summary_line(tmp_path, capsys):
    a = np.random.default_rng(1).random((13, 11)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    code, out = _run(["filter", tmp_path / "a.npy", tmp_path / "m.npy", "--op", "median",
                      "--size", "5", "--mode", "nearest"], capsys)
    assert code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "m.npy"),
                                  ndi.median_filter(a, size=5, mode="nearest"))
    lines = out.strip().splitlines()
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith(f"parvox filter: {tmp_path / 'a.npy'} (13, 11) float32 -> ")
    assert "median (size 5, mode nearest)" in line and f"{tmp_path / 'm.npy'} float32" in line
    assert ", 1 rank, " in line and line.endswith(" s")


def test_counts_agree_in_number():
    from parvox.cli._common import plural

    assert [plural(n, "iteration") for n in (0, 1, 2)] == \
        ["0 iterations", "1 iteration", "2 iterations"]  # fmt: skip


# ---------------------------------------------------------------- errors and help
def test_errors_name_the_whole_subcommand(tmp_path, capsys):
    line = _refused(["recon", "osem", tmp_path / "none", "-o", tmp_path / "r.npy"], capsys)
    assert line.startswith("parvox recon osem: error: argument OUT: "), line
    line = _refused(["recon", "simulate", tmp_path / "scan"], capsys)  # argparse's own error
    assert line.startswith("parvox recon simulate: error: "), line
    line = _refused(["spmd", "translate", tmp_path / "none.py"], capsys)
    assert line.startswith("parvox spmd translate: error: argument PROG: "), line
    line = _refused(["fft", tmp_path / "none.npy", tmp_path / "o.npy"], capsys)
    assert line.startswith("parvox fft: error: argument IN: "), line


def test_ingest_offsets_error_names_the_option(tmp_path, capsys):
    np.save(tmp_path / "in.npy", np.zeros((5, 6, 7), np.uint8))
    line = _refused(["ingest", tmp_path / "in.npy", tmp_path / "s", "--disks", "4",
                     "--offsets", "2,2"], capsys)
    assert line.startswith("parvox ingest: error: argument --offsets: "), line
    assert not (tmp_path / "s").exists()


def _parsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def _shows(text, default):
    if isinstance(default, float) and f"{default:g}" in text:
        return True
    return str(default) in text


def test_help_shows_every_default():
    seen = 0
    for parser in _parsers(cli.build_parser()):
        for action in parser._actions:
            default = action.default
            if (not action.option_strings or default is None or default is argparse.SUPPRESS
                    or isinstance(default, bool)):
                continue
            text = parser._get_formatter()._expand_help(action)
            assert _shows(text, default), f"{parser.prog} {action.option_strings}: {text!r}"
            seen += 1
    assert seen > 30


def test_the_help_formatter_adds_a_missing_default():
    parser = cli._Parser(prog="p")
    parser.add_argument("--k", type=int, default=7, help="a count")
    parser.add_argument("--m", default="x", help="mode (default x)")
    text = parser.format_help()
    assert "a count (default: 7)" in text and "mode (default x)" in text
    assert "(default: x)" not in text


def test_spmd_run_help_shows_prog(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["spmd", "run", "--help"])
    assert info.value.code == 0
    usage = capsys.readouterr().out.splitlines()[0]
    assert usage.startswith("usage: parvox spmd run") and "PROG" in usage


def test_label_refuses_colour_in_every_input_format(tmp_path, capsys, monkeypatch):
    """An RGB .npy, TIFF file, TIFF folder, Zarr, OME-Zarr or store: one line naming IN, exit
    code 2, nothing written."""
    from mpi4py import MPI

    import parvox.io as pio
    from parvox.distarray import DistArray

    vol = np.random.default_rng(1).integers(0, 256, (5, 6, 7, 3)).astype(np.uint8)
    np.save(tmp_path / "rgb.npy", vol)
    write_image(tmp_path / "rgb2d.tif", vol[0])
    d = DistArray.from_global(vol, comm=MPI.COMM_SELF)
    for name in ("rgb3d.tif", "rgb.zarr", "rgb.ome.zarr", "rgb.store"):
        pio.write(d, tmp_path / name)
    _no_work(monkeypatch, "parvox.io:read_distributed", "parvox.io:read",
             "parvox.ndimage:label")
    for name in ("rgb.npy", "rgb2d.tif", "rgb3d.tif", "rgb.zarr", "rgb.ome.zarr", "rgb.store"):
        out = tmp_path / f"o-{name.split('.')[0]}.npy"
        line = _refused(["label", tmp_path / name, out], capsys)
        assert line.startswith("parvox label: error: argument IN: ") and "colour" in line, name
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("o-")) == []
