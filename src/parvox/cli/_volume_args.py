"""Argument helpers shared by the volume and slicing subcommands."""

from __future__ import annotations

import math
from typing import Any

from parvox.cli import UsageError

__all__ = ["float_triple", "int_list", "int_triple"]


def _numbers(text: str, flag: str, count: int | None, kind: type) -> list[Any]:
    parts = [p.strip() for p in str(text).split(",")]
    if count is not None and len(parts) != count:
        raise UsageError(flag, f"expected {count} comma-separated numbers, got {text!r}")
    try:
        values = [kind(p) for p in parts]
    except ValueError:
        raise UsageError(flag, f"expected numbers, got {text!r}") from None
    if kind is float and not all(math.isfinite(v) for v in values):
        raise UsageError(flag, f"numbers must be finite, got {text!r}")
    return values


def int_triple(text: str, flag: str, minimum: int = 1) -> tuple[int, int, int]:
    """Parse ``"z,y,x"`` integers, each ``>= minimum``."""
    vals = _numbers(text, flag, 3, int)
    if min(vals) < minimum:
        raise UsageError(flag, f"values must be >= {minimum}, got {text!r}")
    return vals[0], vals[1], vals[2]


def float_triple(text: str, flag: str, positive: bool = False) -> tuple[float, float, float]:
    """Parse ``"z,y,x"`` floats (``positive``: each > 0)."""
    vals = _numbers(text, flag, 3, float)
    if positive and min(vals) <= 0:
        raise UsageError(flag, f"values must be > 0, got {text!r}")
    return vals[0], vals[1], vals[2]


def int_list(text: str, flag: str, count: int | None = None) -> list[int]:
    """Parse comma-separated integers."""
    return _numbers(text, flag, count, int)


def job_ranks(args: object) -> int:
    """The rank count the command will run at: ``-n``, the MPI job's size, or 1."""
    from parvox import comm, launch

    nprocs = getattr(args, "nprocs", None)
    if nprocs is not None:
        return int(nprocs)
    return comm.size() if launch.in_mpi_job() else 1


def store_disks(store: str) -> int:
    """The number of disks a store's manifest declares (``UsageError`` when unreadable)."""
    import json
    import os

    try:
        with open(os.path.join(store, "volume.json"), encoding="utf-8") as fh:
            return int(json.load(fh)["ndisks"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError("STORE", f"{store} is not a parvox volume store") from None


def check_disk_map(path: str | None, ndisks: int, args: object) -> None:
    """Parse ``--map`` now, so a bad map is a usage error and not a failed job."""
    if path is None:
        return
    from parvox.volume import load_disk_map

    try:
        load_disk_map(path, ndisks, job_ranks(args))
    except OSError as exc:
        raise UsageError("--map", f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError("--map", str(exc)) from None
