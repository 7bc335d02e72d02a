"""``mpi4py.MPI`` imported on first use (importing it initialises MPI) and then cached."""

from __future__ import annotations

from typing import Any

__all__ = ["mpi"]

_MPI: Any = None


def mpi() -> Any:
    """The ``mpi4py.MPI`` module (cheap after the first call, unlike a local import)."""
    global _MPI
    if _MPI is None:
        from mpi4py import MPI

        _MPI = MPI
    return _MPI
