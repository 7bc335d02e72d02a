"""Placement: which rank (and how many threads) runs each stage -- the seed's configuration map.

CAP's configuration map (seed 002, Figure 8) places every thread on a process, so the same
program runs on different hardware without change. Here a stage runs, by default, on the rank
its token was sent to; a *placement* maps stages to ranks instead::

    {"slice": {"read": "dest", "extract": 1}}        # operation -> stage -> where
    {"slice/extract": {"rank": 1, "threads": 2}}     # the same, flat, with a thread count

A value is a rank, ``"dest"`` (the token's destination, the default) or a mapping with
``rank`` and/or ``threads``. :func:`place` returns the operations with their stages placed
(:class:`~parvox.dataflow.Stage` ``rank`` and ``threads``); the runtime then sends a token's
intermediate result to the rank running its next stage.

Examples
--------
>>> from parvox.dataflow import Operation, Stage, Token
>>> op = Operation("o", split=lambda n: [Token(0, n)], stages=(Stage(abs, "a"), Stage(abs, "b")),
...                merge=lambda acc, r: r)
>>> [(s.name, s.rank, s.threads) for s in place([op], {"o/b": {"rank": 1, "threads": 2}}, 2)[0].stages]
[('a', None, 1), ('b', 1, 2)]
>>> try:
...     place([op], {"o/c": 0}, 2)
... except ValueError as exc:
...     print(exc.param)
o/c
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from parvox.dataflow.operation import Operation
from parvox.errors import ParameterError

__all__ = ["check_ranks", "place", "placement_entries"]

#: the value that keeps a stage on its token's destination rank
DEST = "dest"


def placement_entries(placement: Mapping[str, Any]) -> dict[tuple[str, str], Any]:
    """Flatten a placement to ``{(operation, stage): value}`` (``"op/stage"`` keys or
    ``{"op": {"stage": value}}``).

    Raises
    ------
    ParameterError
        Naming the key that is neither form.
    """
    if not isinstance(placement, Mapping):
        raise ParameterError("placement", f"placement must be a mapping, got {placement!r}")
    out: dict[tuple[str, str], Any] = {}
    for key, value in placement.items():
        if not isinstance(key, str) or not key:
            raise ParameterError(str(key), f"placement key {key!r} must be 'op/stage' or 'op'")
        if "/" in key:
            op, stage = key.split("/", 1)
            out[(op, stage)] = value
        elif isinstance(value, Mapping) and not ({"rank", "threads"} >= set(value)):
            for stage, v in value.items():
                out[(key, str(stage))] = v
        else:
            raise ParameterError(key, f"placement key {key!r} must be 'op/stage', or 'op' "
                                 "mapping stage names to places")
    return out


def _where(key: str, value: Any, size: int) -> dict[str, Any]:
    fields = dict(value) if isinstance(value, Mapping) else {"rank": value}
    unknown = set(fields) - {"rank", "threads"}
    if unknown:
        raise ParameterError(key, f"{key}: unknown fields {sorted(unknown)} (rank, threads)")
    out: dict[str, Any] = {}
    if "rank" in fields:
        r = fields["rank"]
        if r == DEST or r is None:
            out["rank"] = None
        elif isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < size:
            raise ParameterError(
                key, f"{key}: rank must be 'dest' or a rank in [0, {size}), got {r!r}"
            )
        else:
            out["rank"] = r
    if "threads" in fields:
        t = fields["threads"]
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            raise ParameterError(key, f"{key}: threads must be an integer >= 1, got {t!r}")
        out["threads"] = t
    return out


def place(
    operations: Iterable[Operation], placement: Mapping[str, Any] | None, size: int
) -> list[Operation]:
    """``operations`` with the stages ``placement`` names placed (nested operations too).

    Parameters
    ----------
    operations : iterable of Operation
    placement : mapping, optional
        See the module docstring; ``None`` or empty: every stage where its token goes.
    size : int
        The ranks of the job (a placed rank must be below it).

    Raises
    ------
    ParameterError
        Naming the key (``"op/stage"``) of an unknown operation or stage, a rank out of range,
        or a bad thread count.
    """
    ops = list(operations)
    entries = placement_entries(placement or {})
    used: set[tuple[str, str]] = set()

    def placed(op: Operation) -> Operation:
        stages = []
        for s in op.stages:
            fn = placed(s.fn) if isinstance(s.fn, Operation) else s.fn
            key = (op.name, s.name)
            changes: dict[str, Any] = {"fn": fn}
            if key in entries:
                used.add(key)
                changes.update(_where("/".join(key), entries[key], size))
            stages.append(dataclasses.replace(s, **changes))
        return dataclasses.replace(op, stages=tuple(stages))

    out = [placed(op) for op in ops]
    for key in entries:
        if key not in used:
            name = "/".join(key)
            raise ParameterError(name, f"placement names {name!r}, which is no stage of the "
                                 "operations (op/stage)")
    return out


def check_ranks(operations: Iterable[Operation], size: int) -> None:
    """Raise :class:`ParameterError` naming ``op/stage`` for a stage placed beyond ``size``."""
    for op in operations:
        for s in op.stages:
            if s.rank is not None and s.rank >= size:
                key = f"{op.name}/{s.name}"
                raise ParameterError(key, f"{key}: rank must be in [0, {size}), got {s.rank}")
            if isinstance(s.fn, Operation):
                check_ranks([s.fn], size)



