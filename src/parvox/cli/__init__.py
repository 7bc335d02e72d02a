"""The ``parvox`` command.

Each subcommand is a module of this package exposing ``HELP``, ``add_arguments(parser)``,
``validate(args)`` (cheap checks of the command line, run before any MPI start) and
``run(args) -> int`` (the work, run on every rank). ``PARALLEL = False`` marks a command that
never runs under MPI (``-n`` is then refused); a module may define ``launch(nprocs, argv)`` to
start its own job for ``-n`` (``parvox serve`` does), else :func:`parvox.launch.relaunch` does.

Launching: ``parvox CMD ... -n N`` outside an MPI job re-executes itself under ``mpiexec -n N``;
inside an MPI job started by ``mpiexec``/``srun`` it runs on the world communicator, and a
``-n`` that disagrees with the world size is an error. Without ``-n`` outside a job it runs on
one rank in-process.

Vector options take negative components with or without ``=``: ``--u -0.6,0.8,0`` and
``--u=-0.6,0.8,0`` are the same.

Bad command-line input exits with code 2 and one line naming the argument. An input error that
every rank raised (a :class:`~parvox.errors.AllRanksError`, or the same ``ValueError`` on every
rank) is printed once, by rank 0, and every rank exits with code 2; one rank's error alone is
printed with its rank and aborts the whole job (code 2 for a ``ValueError``, else 1).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

from parvox.errors import AllRanksError, ParameterError

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["SUBCOMMANDS", "UsageError", "build_parser", "main"]

#: subcommand name -> module under parvox.cli
SUBCOMMANDS: dict[str, str] = {
    "composite": "parvox.cli.composite",
    "demo": "parvox.cli.demo",
    "export": "parvox.cli.export",
    "fft": "parvox.cli.fft",
    "filter": "parvox.cli.filter",
    "info": "parvox.cli.info",
    "ingest": "parvox.cli.ingest",
    "label": "parvox.cli.label",
    "phantom": "parvox.cli.phantom",
    "pyramid": "parvox.cli.pyramid",
    "recon": "parvox.cli.recon",
    "serve": "parvox.cli.serve",
    "slice": "parvox.cli.slice",
    "spmd": "parvox.cli.spmd",
    "trace": "parvox.cli.trace",
    "verify": "parvox.cli.verify",
}

#: a value that starts with "-" but is a number or a comma-separated list of numbers
_NUMBERS = re.compile(
    r"-\s*(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)"
    r"(?:\s*,\s*[-+]?\s*(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan))*",
    re.IGNORECASE,
)


class UsageError(ParameterError):
    """Bad command-line input; :attr:`argument` (also :attr:`param`) names the argument."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(argument, f"argument {argument}: {message}")
        self.argument = argument
        self.detail = message

    def __reduce__(self) -> tuple[type[UsageError], tuple[str, str]]:
        return type(self), (self.argument, self.detail)


class _HelpFormatter(argparse.HelpFormatter):
    """Help that shows every option's default: ``(default: D)`` unless the text already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default is None
            or default is argparse.SUPPRESS
            or isinstance(default, bool)
            or "%(default)" in text
            or "default" in text.lower()
        ):
            return action.help
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit with code 2, whose options take
    values that start with a minus sign (``--u -0.6,0.8,0``), and whose help shows defaults."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        _fail(f"{self.prog}: error: {message}")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(self._attach_negative_values(argv), namespace)

    def _attach_negative_values(self, argv: list[str]) -> list[str]:
        """``--opt -1,2,3`` -> ``--opt=-1,2,3`` for options that take one value, so argparse
        does not read the value as an option (it only knows plain negative numbers)."""
        takes_value = {
            s for a in self._actions if a.nargs is None for s in a.option_strings
        }  # fmt: skip
        out: list[str] = []
        i = 0
        while i < len(argv):
            tok = argv[i]
            if tok == "--":
                out += argv[i:]
                break
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if (
                nxt is not None
                and tok.startswith("-")
                and self._resolve(tok) in takes_value
                and _NUMBERS.fullmatch(nxt)
            ):
                out.append(f"{tok}={nxt}")
                i += 2
                continue
            out.append(tok)
            i += 1
        return out

    def _resolve(self, option: str) -> str | None:
        """The option string ``option`` names: itself, or the one it abbreviates."""
        known = [s for a in self._actions for s in a.option_strings]
        if option in known:
            return option
        if not (self.allow_abbrev and option.startswith("--")):
            return None
        matches = [s for s in known if s.startswith(option)]
        return matches[0] if len(matches) == 1 else None


def _fail(line: str, code: int = 2) -> NoReturn:
    sys.stderr.write(line.rstrip() + "\n")
    raise SystemExit(code)


def _load(name: str) -> ModuleType:
    return importlib.import_module(SUBCOMMANDS[name])


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (importing each subcommand module)."""
    parser = _Parser(prog="parvox", description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in SUBCOMMANDS:
        module = _load(name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        _name_subcommands(p)
        if getattr(module, "PARALLEL", True):
            p.add_argument(
                "-n",
                "--nprocs",
                type=int,
                default=None,
                metavar="N",
                help="number of MPI ranks (starts mpiexec when not already inside an MPI job; "
                "default: 1, or the ranks of the MPI job it runs in)",
            )
    return parser


def _name_subcommands(parser: argparse.ArgumentParser) -> None:
    """Record on every (nested) subcommand parser its full name (``parvox recon osem``), which
    :func:`main` puts before every error; the innermost subcommand's default wins."""
    parser.set_defaults(_prog=parser.prog)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _name_subcommands(child)


def _message(exc: ValueError) -> str:
    """The line reporting a command-line error: ``argument NAME: ...`` when it names one."""
    if isinstance(exc, ParameterError) and not isinstance(exc, UsageError):
        return f"argument {exc.param}: {exc}"
    return str(exc)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``parvox`` command; returns the process exit code."""
    from parvox import comm, launch

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    module = _load(args.command)
    prog = getattr(args, "_prog", f"parvox {args.command}")
    nprocs = getattr(args, "nprocs", None)
    if nprocs is not None and nprocs < 1:
        _fail(f"{prog}: error: argument -n/--nprocs: must be >= 1, got {nprocs}")
    inside = launch.in_mpi_job()
    try:
        module.validate(args)  # on every rank inside a job, so all of them stop together
    except ValueError as exc:
        if not inside or comm.rank() == 0:
            _fail(f"{prog}: error: {_message(exc)}")
        raise SystemExit(2) from None
    if not inside and nprocs is not None and getattr(module, "PARALLEL", True):
        start = getattr(module, "launch", None)
        if start is not None:
            return int(start(nprocs, argv))
        return launch.relaunch(nprocs, ["-m", "parvox", *argv])
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
    # failing ranks find out on this communicator whether they all failed (reserved for it)
    verdict = comm.world().Dup() if inside else None
    try:
        code = int(module.run(args) or 0)
    except AllRanksError as exc:  # raised on every rank alike: reported once, nobody waits
        if not comm.world_rank():
            sys.stderr.write(f"{prog}: error: {exc}\n")
        code = 2 if isinstance(exc, ValueError) else 1
    except ValueError as exc:
        # Input errors that only show once data is read (e.g. a wrong dimensionality).
        code = _input_error(prog, exc, verdict)
    # every rank gets here (a rank that fails otherwise aborts the job): free collectively
    if verdict is not None:
        verdict.Free()
    return code


def _input_error(prog: str, exc: ValueError, verdict: MPI.Intracomm | None) -> int:
    """Report a ValueError raised inside the job in one line; exit code 2.

    Every failing rank joins a non-blocking barrier on ``verdict``: when all ranks join it
    (they all raised), rank 0 alone prints the message and every rank returns 2 -- nobody
    waits, so no abort. Otherwise the error is this rank's alone while the others wait in a
    collective: it is printed with the rank and the job is aborted with code 2.
    """
    from parvox import comm

    r = comm.world_rank()
    if verdict is None or comm.all_ranks_joined(verdict, comm.ABORT_GRACE_S):
        if not r:
            sys.stderr.write(f"{prog}: error: {exc}\n")
        return 2
    sys.stderr.write(f"{prog}: error (rank {r}): {exc}\n")
    comm.abort(2)
