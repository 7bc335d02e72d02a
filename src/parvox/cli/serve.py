"""``parvox serve``: the parallel slice server (HTTP API and web viewer) on a volume store.

``-n N`` outside an MPI job starts ``mpiexec -n N`` itself, like every parvox command, but
through :func:`parvox.server.launcher.launch_server` (MPICH's ``-disable-auto-cleanup``, and a
launcher that names a rank that dies). Inside an MPI job (``mpiexec``/``srun``) it runs
:func:`parvox.server.run_server` on the job's ranks.

Its options are made from the fields of :class:`~parvox.server.ServerOptions`
(:func:`~parvox.server.options.option_docs`): one option per field, the field's help text,
its default as ``--help`` shows it, booleans as ``--x/--no-x``, sizes in the field's unit.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from parvox.cli import UsageError
from parvox.errors import ParameterError
from parvox.server.options import ServerOptions, option_docs

HELP = "serve oblique slices of a volume store over HTTP, with a web viewer"



def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox serve``: ``STORE`` and one option per :class:`ServerOptions` field."""
    parser.add_argument("store", metavar="STORE", help="volume store directory (parvox ingest)")
    defaults = ServerOptions()
    for doc in option_docs():
        default = doc.cli_default(getattr(defaults, doc.name))
        text = doc.help.rstrip(".")
        kwargs: dict[str, object] = {"dest": doc.name, "default": default}
        if isinstance(default, bool):
            kwargs["action"] = argparse.BooleanOptionalAction
            text += f" (default {'on' if default else 'off'})"
        else:
            if doc.scale != 1:
                kwargs["type"] = float
            elif default is not None:
                kwargs["type"] = type(default)
            if doc.metavar is not None:
                kwargs["metavar"] = doc.metavar
            if default is not None:
                text += f" (default {default:g})" if isinstance(default, float) else (
                    f" (default {default})"
                )
        parser.add_argument(doc.flag, help=text.replace("%", "%%"), **kwargs)  # type: ignore[arg-type]


def validate(args: argparse.Namespace) -> None:
    """Cheap checks before MPI starts; leaves the :class:`ServerOptions` in ``args.options``."""
    if not os.path.isfile(os.path.join(args.store, "volume.json")):
        raise UsageError("STORE", f"{args.store!r} is not a volume store (no volume.json)")
    flags = {doc.name: doc.flag for doc in option_docs()}
    values = {}
    for doc in option_docs():
        value = getattr(args, doc.name)
        if doc.scale != 1:
            if not value >= 0:
                raise UsageError(doc.flag, f"must be >= 0, got {value}")
            value = int(value * doc.scale)
        values[doc.name] = value
    try:
        args.options = ServerOptions(**values)
    except ParameterError as exc:
        raise UsageError(flags.get(exc.param, exc.param), str(exc)) from None


def launch(nprocs: int, argv: Sequence[str]) -> int:
    """Run ``parvox serve ARGV`` on ``nprocs`` ranks (the ``-n`` re-exec); its exit code."""
    from parvox.server.launcher import launch_server

    return launch_server(nprocs, ["-m", "parvox", *argv])


def run(args: argparse.Namespace) -> int:
    """Every rank runs the engine; rank 0 also runs the HTTP server until interrupted."""
    from parvox.server.job import run_server

    return run_server(args.store, args.options)


