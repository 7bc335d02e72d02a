"""Argument helpers shared by the volume and slicing subcommands."""

from __future__ import annotations

import math

from parvox.cli import UsageError

__all__ = ["float_triple", "int_list", "int_triple"]


def _numbers(text: str, flag: str, count: int | None, kind: type) -> list:
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
    return tuple(vals)  # type: ignore[return-value]


def float_triple(text: str, flag: str, positive: bool = False) -> tuple[float, float, float]:
    """Parse ``"z,y,x"`` floats (``positive``: each > 0)."""
    vals = _numbers(text, flag, 3, float)
    if positive and min(vals) <= 0:
        raise UsageError(flag, f"values must be > 0, got {text!r}")
    return tuple(vals)  # type: ignore[return-value]


def int_list(text: str, flag: str, count: int | None = None) -> list[int]:
    """Parse comma-separated integers."""
    return _numbers(text, flag, count, int)
