"""``parvox serve``'s options are generated from ServerOptions: every field, its help, its default."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from parvox.cli import build_parser
from parvox.cli.serve import add_arguments, validate
from parvox.server.options import ServerOptions, option_doc, option_docs

#: the options ``parvox serve --help`` listed before they were generated (none may go)
FLAGS_BEFORE = {
    "--host", "--port", "--config", "--cache-mb", "--window", "--batch", "--max-pending",
    "--max-size", "--dead-after", "--front-share", "--heap-retain", "--no-heap-retain",
    "--png-level", "--encode-threads", "-n", "--nprocs", "-h", "--help",
}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "server.md"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p


def _serve_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["serve"]


def test_every_option_of_before_is_still_there():
    flags = {s for a in _serve_parser()._actions for s in a.option_strings}
    assert FLAGS_BEFORE <= flags


def test_every_field_has_an_option_with_its_default_and_help():
    actions = {a.dest: a for a in _parser()._actions}
    defaults = ServerOptions()
    for f in dataclasses.fields(ServerOptions):
        doc = option_doc(f.name)
        action = actions[f.name]
        assert doc.flag in action.option_strings
        assert action.default * doc.scale == getattr(defaults, f.name) if doc.scale != 1 else (
            action.default == getattr(defaults, f.name)
        )
        assert action.help is not None and action.help.startswith(doc.help.rstrip("."))
        if isinstance(f.default, bool):
            assert f"--no-{doc.flag[2:]}" in action.option_strings
            assert action.help.endswith(f"(default {'on' if f.default else 'off'})")
        elif f.default is not None:
            shown = doc.cli_default(f.default)
            assert f"(default {shown:g})" in action.help if isinstance(shown, float) else (
                f"(default {shown})" in action.help
            )


def test_parsed_defaults_give_the_default_options(tmp_path):
    (tmp_path / "volume.json").write_text("{}")
    args = _parser().parse_args([str(tmp_path)])
    validate(args)
    assert args.options == ServerOptions()


def test_options_reach_their_fields(tmp_path):
    (tmp_path / "volume.json").write_text("{}")
    args = _parser().parse_args([
        str(tmp_path), "--cache-mb", "1.5", "--no-heap-retain", "--no-verify", "--threads", "3",
        "--request-timeout", "7.5", "--max-requests", "2", "--port", "0", "--split", "whole",
    ])
    validate(args)
    o = args.options
    assert o.split == "whole"
    assert o.cache_bytes == 3 << 19 and o.heap_retain is False and o.verify is False
    assert (o.threads, o.request_timeout, o.max_requests, o.port) == (3, 7.5, 2, 0)


@pytest.mark.parametrize(("argv", "flag"), [
    (["--threads", "0"], "--threads"),
    (["--request-timeout", "0"], "--request-timeout"),
    (["--max-requests", "0"], "--max-requests"),
    (["--split", "extents"], "--split"),
])
def test_errors_name_the_option(tmp_path, argv, flag):
    from parvox.cli import UsageError

    (tmp_path / "volume.json").write_text("{}")
    args = _parser().parse_args([str(tmp_path), *argv])
    with pytest.raises(UsageError) as info:
        validate(args)
    assert info.value.argument == flag


def test_docs_list_every_option_with_its_default():
    """docs/server.md's option table has one row per field: flag, field, default."""
    text = DOCS.read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(--[a-z-]+)[^|]*\|.*$", text, re.M)}
    for doc in option_docs():
        default = getattr(ServerOptions(), doc.name)
        shown = doc.cli_default(default)
        assert doc.flag in rows, f"docs/server.md: no row for {doc.flag}"
        row = rows[doc.flag]
        assert f"`{doc.name}`" in row, row
        want = ("on" if shown else "off") if isinstance(shown, bool) else (
            "none" if shown is None else f"{shown:g}" if isinstance(shown, float) else str(shown)
        )
        assert f"| {want} |" in row, f"{row!r}: default should read {want}"
