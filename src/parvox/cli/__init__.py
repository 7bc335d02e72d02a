"""The ``parvox`` command.

Each subcommand is a module of this package exposing ``HELP``, ``add_arguments(parser)``,
``validate(args)`` (cheap checks of the command line, run before any MPI start) and
``run(args) -> int`` (the work, run on every rank). ``PARALLEL = False`` marks a command that
never runs under MPI (``-n`` is then refused).

Launching: ``parvox CMD ... -n N`` outside an MPI job re-executes itself under ``mpiexec -n N``;
inside an MPI job started by ``mpiexec``/``srun`` it runs on the world communicator, and a
``-n`` that disagrees with the world size is an error. Without ``-n`` outside a job it runs on
one rank in-process.

Bad command-line input exits with code 2 and one line naming the argument. An exception on
any rank prints the rank and message and aborts the whole job with a non-zero exit code.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

__all__ = ["SUBCOMMANDS", "UsageError", "main"]

#: subcommand name -> module under parvox.cli
SUBCOMMANDS: dict[str, str] = {
    "composite": "parvox.cli.composite",
    "demo": "parvox.cli.demo",
    "filter": "parvox.cli.filter",
    "info": "parvox.cli.info",
    "ingest": "parvox.cli.ingest",
    "label": "parvox.cli.label",
    "phantom": "parvox.cli.phantom",
    "recon": "parvox.cli.recon",
    "serve": "parvox.cli.serve",
    "slice": "parvox.cli.slice",
    "trace": "parvox.cli.trace",
    "verify": "parvox.cli.verify",
}


class UsageError(ValueError):
    """Bad command-line input; the message names the argument."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"argument {argument}: {message}")
        self.argument = argument


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit with code 2."""

    def error(self, message: str) -> NoReturn:
        _fail(f"{self.prog}: error: {message}")


def _fail(line: str, code: int = 2) -> NoReturn:
    sys.stderr.write(line.rstrip() + "\n")
    raise SystemExit(code)


def _load(name: str) -> ModuleType:
    return importlib.import_module(SUBCOMMANDS[name])


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (importing each subcommand module)."""
    parser = _Parser(prog="parvox", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in SUBCOMMANDS:
        module = _load(name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        if getattr(module, "PARALLEL", True):
            p.add_argument(
                "-n",
                "--nprocs",
                type=int,
                default=None,
                metavar="N",
                help="number of MPI ranks (starts mpiexec when not already inside an MPI job)",
            )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``parvox`` command; returns the process exit code."""
    from parvox import comm

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    module = _load(args.command)
    prog = f"parvox {args.command}"
    nprocs = getattr(args, "nprocs", None)
    if nprocs is not None and nprocs < 1:
        _fail(f"{prog}: error: argument -n/--nprocs: must be >= 1, got {nprocs}")
    inside = comm.in_mpi_job()
    try:
        module.validate(args)  # on every rank inside a job, so all of them stop together
    except ValueError as exc:
        if not inside or comm.rank() == 0:
            _fail(f"{prog}: error: {exc}")
        raise SystemExit(2) from None
    if not inside and nprocs is not None and getattr(module, "PARALLEL", True):
        command = comm.launch_command(nprocs, ["-m", "parvox", *argv])
        try:
            return subprocess.call(command)
        except KeyboardInterrupt:
            return 130
    if inside:
        size = comm.size()
        if nprocs is not None and nprocs != size:
            if comm.rank() == 0:
                sys.stderr.write(
                    f"{prog}: error: argument -n/--nprocs: {nprocs} conflicts with the MPI job's "
                    f"{size} ranks (drop -n under an external mpiexec/srun)\n"
                )
            return 2
    comm.abort_on_exception()
    try:
        return int(module.run(args) or 0)
    except ValueError as exc:
        # Input errors that only show once data is read (e.g. a wrong dimensionality).
        return _input_error(prog, exc)


def _input_error(prog: str, exc: ValueError) -> int:
    """Report a ValueError raised inside the job in one line; exit code 2.

    An error every rank raised together (``exc.collective``, e.g. from :mod:`parvox.io`) is
    printed by rank 0 and every rank returns 2: nobody waits, so no abort is needed. Any other
    ValueError may be one rank's alone while the others wait in a collective: rank 0 reports at
    once, another rank after a short pause (so an error that every rank raised is printed once,
    by rank 0, before its abort ends the job), then the job is aborted with code 2.
    """
    import time

    from parvox import comm

    r = comm._rank_or_none()
    if getattr(exc, "collective", False):
        if not r:
            sys.stderr.write(f"{prog}: error: {exc}\n")
        return 2
    if r:
        time.sleep(1.0)
    where = f" (rank {r})" if r else ""
    sys.stderr.write(f"{prog}: error{where}: {exc}\n")
    sys.stderr.flush()
    comm._abort(2)
    return 2
