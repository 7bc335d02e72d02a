"""The error every rank raises alike (the ``parvox`` command then reports it once, exit 2)."""

from __future__ import annotations

__all__ = ["collective_error"]


def collective_error(message: str) -> ValueError:
    """A ValueError marked ``collective``: every rank of the job raises the same one.

    Examples
    --------
    >>> collective_error("subsets: too many").collective
    True
    """
    exc = ValueError(message)
    exc.collective = True  # type: ignore[attr-defined]
    return exc
