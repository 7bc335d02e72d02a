"""The parts of a parallel operation: tokens, stages and the operation itself (the CAP construct).

A parallel operation (the seed's *parallel while*, Figures 4-5) is

* a ``split`` function, run on the rank that starts the operation (the *origin*), turning one
  request into tokens, each naming where it must go;
* one or more pipelined :class:`Stage` s, run on the rank the token was sent to (or on the rank
  a stage is placed on: ``Stage(rank=...)``, the seed's configuration map), one after the other,
  each in its own thread(s) fed by a bounded queue (an I/O stage feeding a compute stage);
  a stage may itself be an :class:`Operation` (hierarchical composition, seed section 3: its
  split and merge run on the rank running the stage);
* a ``merge`` function, run on the origin, called once per token with the last stage's result;
  the operation ends when exactly as many results as tokens have been merged.

Tokens flow split -> stages -> merge and never back, so the graph is acyclic by construction:
no stage can wait on another rank's stage, and the only waits are the split side's flow control
(which results always release) and the merge (which every token answers exactly once, with a
result or an error).

Examples
--------
>>> import numpy as np
>>> op = Operation(
...     "sum-squares",
...     split=lambda n: (Token(i % 2, np.arange(i, i + 4.0)) for i in range(n)),
...     stages=(Stage(np.square, "square"), Stage(np.sum, "sum")),
...     merge=lambda acc, r: acc + float(r),
...     init=lambda n: 0.0,
... )
>>> op.stage_names
('square', 'sum')
>>> float(serial(op, 3))  # the serial reference: the same functions, one process
98.0
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from parvox.errors import ParameterError

__all__ = ["Operation", "Stage", "Token", "nested_operations", "serial"]


@dataclasses.dataclass(frozen=True)
class Token:
    """A sub-request produced by ``split``.

    Parameters
    ----------
    dest : int or sequence of int
        The rank that owns the data the token names, or several ranks any of which can serve it
        (the runtime sends it to the one with the fewest tokens in flight: shortest queue).
    payload : object
        A NumPy array, a small object, or tuples/lists/dicts of them (see
        :mod:`parvox.dataflow.wire`).
    """

    dest: int | tuple[int, ...]
    payload: Any

    def __post_init__(self) -> None:
        dest = self.dest
        if isinstance(dest, Sequence) and not isinstance(dest, str):
            cands = tuple(int(d) for d in dest)
            if not cands:
                raise ValueError("dest must name at least one rank")
            object.__setattr__(self, "dest", cands)
        elif isinstance(dest, int) and not isinstance(dest, bool):
            object.__setattr__(self, "dest", int(dest))
        else:
            raise TypeError(f"dest must be a rank or a sequence of ranks, got {dest!r}")

    @property
    def candidates(self) -> tuple[int, ...]:
        """The ranks that may serve this token."""
        return self.dest if isinstance(self.dest, tuple) else (self.dest,)


@dataclasses.dataclass(frozen=True)
class Stage:
    """One pipelined step, run on the token's destination rank.

    Parameters
    ----------
    fn : callable or Operation
        ``fn(payload) -> payload`` for the next stage (or the result sent to the merge).
        It may release the GIL (I/O, NumPy, numba ``nogil`` kernels) so stages overlap.
        An :class:`Operation` makes the stage a nested parallel operation: the payload is its
        request, run (split, stages, merge) from the rank running the stage, and its result
        is the stage's output.
    name : str
        For statistics and error messages.
    threads : int
        Worker threads of this stage on each rank (>= 1).
    queue : int
        Capacity of the bounded queue feeding this stage from the previous one (>= 1). The
        first stage is fed by the network and bounded by the split side's window instead.
    rank : int, optional
        The rank running this stage for every token (placement); ``None`` (the default): the
        rank the token was sent to. A token's payload travels to the next stage's rank.
    """

    fn: Callable[[Any], Any] | Operation
    name: str = ""
    threads: int = 1
    queue: int = 4
    rank: int | None = None

    def __post_init__(self) -> None:
        if not (callable(self.fn) or isinstance(self.fn, Operation)):
            raise TypeError(f"fn must be callable or an Operation, got {self.fn!r}")
        if self.rank is not None and (
            isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 0
        ):
            raise ParameterError("rank", f"rank must be None or an integer >= 0, got {self.rank!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads must be an integer >= 1, got {self.threads!r}")
        if isinstance(self.queue, bool) or not isinstance(self.queue, int) or self.queue < 1:
            raise ValueError(f"queue must be an integer >= 1, got {self.queue!r}")
        if not self.name:
            name = self.fn.name if isinstance(self.fn, Operation) else None
            object.__setattr__(self, "name", name or getattr(self.fn, "__name__", "stage"))


def _empty_list(request: Any) -> list[Any]:
    return []


def _identity(acc: Any) -> Any:
    return acc


@dataclasses.dataclass(frozen=True)
class Operation:
    """A parallel operation: ``split`` -> pipelined ``stages`` -> ``merge``.

    Parameters
    ----------
    name : str
        Unique within a :class:`~parvox.dataflow.Dataflow`; every rank must register the same
        operations (SPMD).
    split : callable
        ``split(request) -> iterable of Token``; run lazily on the origin, so flow control
        paces it.
    stages : sequence of Stage
        At least one.
    merge : callable
        ``merge(acc, result) -> acc``; results arrive in any order.
    init : callable
        ``init(request) -> acc``; default an empty list.
    finish : callable
        ``finish(acc) -> value`` returned to the caller; default the accumulator itself.
    """

    name: str
    split: Callable[[Any], Iterable[Token]]
    stages: tuple[Stage, ...]
    merge: Callable[[Any, Any], Any]
    init: Callable[[Any], Any] = _empty_list
    finish: Callable[[Any], Any] = _identity

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        stages = tuple(self.stages)
        if not stages:
            raise ValueError("stages must hold at least one Stage")
        for s in stages:
            if not isinstance(s, Stage):
                raise TypeError(f"stages must be Stage objects, got {s!r}")
        object.__setattr__(self, "stages", stages)
        for field in ("split", "merge", "init", "finish"):
            if not callable(getattr(self, field)):
                raise TypeError(f"{field} must be callable")

    @property
    def stage_names(self) -> tuple[str, ...]:
        """Names of the stages in pipeline order."""
        return tuple(s.name for s in self.stages)


def nested_operations(op: Operation) -> list[Operation]:
    """The operations nested in ``op``'s stages, depth first (``op`` itself excluded).

    Raises
    ------
    ValueError
        When an operation is nested in itself (the graph must stay acyclic).
    """
    out: list[Operation] = []

    def walk(o: Operation, path: tuple[str, ...]) -> None:
        for s in o.stages:
            if isinstance(s.fn, Operation):
                if s.fn.name in path:
                    raise ValueError(f"operation {s.fn.name!r} is nested in itself")
                out.append(s.fn)
                walk(s.fn, (*path, s.fn.name))

    walk(op, (op.name,))
    return out


def serial(op: Operation, request: Any) -> Any:
    """Run ``op`` on ``request`` in this process, one token after the other: split, every stage
    (nested operations recursively), merge in split order, finish. The reference a parallel run
    must equal (up to the merge order, which a commutative merge does not see).

    Examples
    --------
    >>> inner = Operation("row-sums", split=lambda a: [Token(0, r) for r in a],
    ...                   stages=(Stage(sum),), merge=lambda acc, r: acc + [r])
    >>> outer = Operation("tiles", split=lambda tiles: [Token(0, t) for t in tiles],
    ...                   stages=(Stage(inner),), merge=lambda acc, r: acc + [r])
    >>> serial(outer, [[[1, 2], [3]], [[4]]])
    [[3, 3], [4]]
    """
    acc = op.init(request)
    for tok in op.split(request):
        value = tok.payload
        for s in op.stages:
            value = serial(s.fn, value) if isinstance(s.fn, Operation) else s.fn(value)
        acc = op.merge(acc, value)
    return op.finish(acc)
