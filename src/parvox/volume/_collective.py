"""Collective error agreement for the store builders (ingest, pyramid, export).

A builder's steps run between collectives; when one rank fails, every rank must learn it at the
next agreement point instead of waiting forever in a collective the failed rank never enters.

Examples
--------
>>> from mpi4py import MPI
>>> agree(MPI.COMM_SELF, None, "testing")  # nobody failed: returns
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parvox.comm import RankFailure

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["agree"]


def agree(comm: MPI.Intracomm, error: BaseException | None, what: str) -> None:
    """Raise on every rank when any rank failed (its own error where it failed, a
    :class:`~parvox.comm.RankFailure` naming the first failed rank elsewhere)."""
    failed = comm.allgather(None if error is None else f"{type(error).__name__}: {error}")
    if error is not None:
        raise error
    bad = [(r, msg) for r, msg in enumerate(failed) if msg is not None]
    if bad:
        r, msg = bad[0]
        raise RankFailure(f"rank {r} failed while {what}: {msg}")
