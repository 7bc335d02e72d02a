"""``parvox spmd translate|check|run PROG``: serial Python programs with ``#$spmd`` directives.

- ``check PROG``: every error and warning as ``PROG:LINE:COL: error: message`` with the source
  line and a caret; exit 2 when there is an error.
- ``translate PROG [-o OUT]``: the translated program (to OUT, or stdout).
- ``run PROG [-n N] [--verify] [-- ARGS...]``: check, translate (cached by content) and run on
  N ranks; ``ARGS`` reach the program as ``sys.argv[1:]``. A rank that fails aborts the job
  with the program's traceback, at the program's own lines. ``--verify`` also runs the program
  serially and fails (exit 1, one line) at the first difference in stdout or in the files
  written (:mod:`parvox.spmd.verify`).

Examples
--------
.. code-block:: console

    $ parvox spmd check smooth.py
    smooth.py:9:8: error: unknown clause 'dopr'; clauses are init, end, ...
        #$spmd dopr
               ^
    $ parvox spmd translate smooth.py -o smooth_translated.py
    $ parvox spmd run smooth.py -n 4 -- in.npy
    $ parvox spmd run smooth.py -n 4 --verify -- in.npy
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from parvox.cli import UsageError
from parvox.cli._common import plural

__all__ = ["HELP", "add_arguments", "launch", "run", "validate"]

HELP = "check, translate or run a Python program parallelised with #$spmd directives"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``check``, ``translate`` and ``run`` actions and their arguments."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    actions.required = True
    check = actions.add_parser("check", help="report errors and warnings in the directives")
    check.add_argument("program", metavar="PROG", help="Python program with #$spmd directives")
    translate = actions.add_parser("translate", help="write the translated program")
    translate.add_argument("program", metavar="PROG", help="Python program with #$spmd directives")
    translate.add_argument(
        "-o", "--output", metavar="OUT", default=None, help="output file (default: stdout)"
    )
    run_ = actions.add_parser(
        "run", help="check, translate and run the program on N ranks",
        usage="%(prog)s [-h] PROG [-n N] [-- ARGS ...]",
    )  # fmt: skip
    run_.add_argument(
        "-n",
        "--nprocs",
        type=int,
        default=argparse.SUPPRESS,  # keeps a `parvox spmd -n N run ...` given before the action
        metavar="N",
        help="number of MPI ranks (starts mpiexec when not already inside an MPI job)",
    )
    run_.add_argument(
        "--verify",
        action="store_true",
        default=argparse.SUPPRESS,  # also taken after PROG (see _ProgramLine)
        help="run the program serially too and fail at the first difference in its stdout or files",
    )
    run_.add_argument(
        "program",
        metavar="PROG [-n N] [--verify] [-- ARGS ...]",
        nargs=argparse.REMAINDER,
        action=_ProgramLine,
        help="the program, then -n N and, after --, the program's own arguments",
    )


class _ProgramLine(argparse.Action):
    """``PROG [-n N] [-- ARGS...]``: argparse cannot take -n between two positionals itself."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        words = [str(v) for v in values] if isinstance(values, list) else []
        if not words or words[0] == "--":
            parser.error("the following arguments are required: PROG")
        namespace.program, namespace.args = words[0], []
        rest = words[1:]
        k = 0
        while k < len(rest):
            word = rest[k]
            if word == "--":
                namespace.args += rest[k + 1 :]
                break
            m = re.fullmatch(r"(-n|--nprocs)(=?)(.*)", word)
            if word == "--verify":
                namespace.verify = True
            elif m is not None:
                value = m.group(3)
                if not value:
                    k += 1
                    value = rest[k] if k < len(rest) else ""
                try:
                    namespace.nprocs = int(value)
                except ValueError:
                    parser.error(f"argument -n/--nprocs: invalid int value: {value!r}")
            elif word.startswith("-"):
                parser.error(f"unknown option {word!r}: give the program's own options after --")
            else:
                namespace.args.append(word)
            k += 1


def _read(path: str) -> str:
    if not os.path.exists(path):
        raise UsageError("PROG", f"{path}: no such file")
    if os.path.isdir(path):
        raise UsageError("PROG", f"{path}: is a directory")
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("PROG", f"{path}: cannot read it ({exc})") from None


def _speaks() -> bool:
    """Whether this process reports problems: outside an MPI job, or rank 0 inside one."""
    from parvox import comm
    from parvox.launch import in_mpi_job

    return not in_mpi_job() or comm.rank() == 0


def validate(args: argparse.Namespace) -> None:
    """Check the command line and, for translate and run, the program's directives."""
    from parvox.spmd import analyse, read_source

    if args.action != "run" and getattr(args, "nprocs", None) is not None:
        raise UsageError("-n/--nprocs", f"only `parvox spmd run` takes -n, not {args.action}")
    text = _read(args.program)
    if args.action == "translate" and args.output is not None:
        folder = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(folder):
            raise UsageError("-o/--output", f"{args.output}: folder {folder} does not exist")
        if os.path.abspath(args.output) == os.path.abspath(args.program):
            raise UsageError("-o/--output", f"{args.output} is PROG itself; write elsewhere")
    if args.action == "run" and getattr(args, "verify", False):
        from parvox.launch import in_mpi_job

        if in_mpi_job():
            raise UsageError(
                "--verify", "starts its own serial and parallel runs: give -n N outside mpiexec"
            )
    if args.action == "check":
        return
    analysis = analyse(read_source(text, args.program))
    if not analysis.ok:
        if _speaks():
            from parvox.spmd.diagnostics import format_all

            sys.stderr.write(format_all(analysis.diagnostics, args.program, text) + "\n")
        errors = sum(d.severity == "error" for d in analysis.diagnostics)
        raise UsageError("PROG", f"{args.program}: {plural(errors, 'error')} in its #$spmd directives")


def _warnings(path: str) -> None:
    from parvox.spmd import analyse, read_source
    from parvox.spmd.diagnostics import format_all

    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    found = analyse(read_source(text, path)).diagnostics
    if found and _speaks():
        sys.stderr.write(format_all(found, path, text) + "\n")
        sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    """Check, translate or run PROG."""
    from parvox.spmd import analyse, read_source
    from parvox.spmd.diagnostics import format_all
    from parvox.spmd.program import ProgramFailed, run_translated, translate_file
    from parvox.spmd.translator import render

    if args.action == "check":
        text = _read(args.program)
        analysis = analyse(read_source(text, args.program))
        if analysis.diagnostics:
            print(format_all(analysis.diagnostics, args.program, text))
            errors = sum(d.severity == "error" for d in analysis.diagnostics)
            notes = sum(d.severity == "note" for d in analysis.diagnostics)
            warnings = len(analysis.diagnostics) - errors - notes
            said = f", {plural(notes, 'note')}" if notes else ""
            print(f"{args.program}: {plural(errors, 'error')}, {plural(warnings, 'warning')}{said}")
            return 2 if errors else 0
        print(f"{args.program}: no problems found")
        return 0
    if args.action == "run" and getattr(args, "verify", False):
        return _verify(args.program, args.args, 1)  # the runs it starts print the warnings
    _warnings(args.program)
    if args.action == "translate":
        text = _read(args.program)
        translated = render(analyse(read_source(text, args.program)))
        if args.output is None:
            sys.stdout.write(translated)
        else:
            from parvox.io import atomic_write

            with atomic_write(args.output, "w") as fh:
                fh.write(translated)
        return 0
    translated_path = translate_file(args.program)
    try:
        return run_translated(args.program, translated_path, args.args)
    except ProgramFailed as exc:  # the program's own traceback, at its own lines, then abort
        from parvox import comm

        r = comm.world_rank()
        where = f"rank {r}" if r is not None else "process"
        sys.stderr.write(f"{exc.report}parvox: {where} failed: ProgramFailed: {exc}\n")
        comm.abort(1)


def _verify(program: str, argv: list[str], nprocs: int) -> int:
    from parvox.launch import MPI_JOB_ENV
    from parvox.spmd.verify import verify_run

    env = {k: v for k, v in os.environ.items() if k not in MPI_JOB_ENV}
    result = verify_run(program, argv, nprocs, env)
    if result.code:
        sys.stderr.write(f"parvox spmd: error: --verify: {result.message}\n")
    else:
        sys.stderr.write(f"parvox spmd: --verify: {result.message}\n")
    return result.code


def launch(nprocs: int, argv: list[str]) -> int:
    """Start ``parvox spmd ...`` on ``nprocs`` ranks (``--verify``: and serially, then compare)."""
    from parvox.cli import build_parser
    from parvox.launch import relaunch

    args = build_parser().parse_args(argv)
    if args.action == "run" and getattr(args, "verify", False):
        return _verify(args.program, args.args, nprocs)
    return relaunch(nprocs, ["-m", "parvox", *argv])
