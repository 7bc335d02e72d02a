"""Preparing and starting a collective: one path for every operation (internal).

A function of the API validates its arguments into an
:class:`~parvox.collectives.algorithms.Args`, then :func:`launch` resolves the algorithm
(``auto`` included), optionally checks that all ranks agree, looks the builder up in the
algorithm table and starts what it returns: a schedule as a
:class:`~parvox.collectives.requests.Request`, MPI's own collective as a
:class:`~parvox.collectives.requests.NativeRequest`.

The blocking functions are generated from the ``i`` forms by :func:`blocking`: the same
arguments (less ``progress``), and the request is run to completion at once. With nothing
else outstanding the schedule then runs alone, round after round, without registering.

Examples
--------
>>> import numpy as np
>>> a = flat(np.arange(6.0).reshape(2, 3), "sendbuf")
>>> a.shape
(6,)
>>> parse_counts([2, 0, 1], 3, "counts")
(2, 0, 1)
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from parvox.collectives._context import Context
from parvox.collectives._engine import ENGINE
from parvox.collectives._mpi import mpi
from parvox.collectives._native import Native
from parvox.collectives.alg_nodes import NODE_ALGORITHMS
from parvox.collectives.algorithms import TABLE, Args, Builder, choose, parse_algorithm
from parvox.collectives.ops import ReduceOp
from parvox.collectives.progress import parse_progress, thread
from parvox.collectives.requests import (
    BaseRequest,
    CollectiveError,
    CompletedRequest,
    NativeRequest,
    Request,
    mpi_failure,
)
from parvox.collectives.schedule import Schedule

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "blocking",
    "BlockingScope",
    "blocking_scope",
    "check_root",
    "checked",
    "flat",
    "is_in_place",
    "launch",
    "launch_native",
    "parse_counts",
    "resolve",
    "start_schedule",
]

Array = NDArray[Any]
P = ParamSpec("P")
T = TypeVar("T")

_LOCAL = threading.local()


def is_in_place(buf: object) -> bool:
    """Whether ``buf`` is ``MPI.IN_PLACE``."""
    return buf is mpi().IN_PLACE


def flat(buf: Any, name: str, writable: bool = False) -> Array:
    """A flat C-contiguous view of ``buf`` (a copy for a non-contiguous input to send).

    A buffer to receive into must be a writable C-contiguous ``numpy.ndarray``.
    """
    if not isinstance(buf, np.ndarray):
        if writable:
            raise TypeError(f"{name}: expected a numpy.ndarray, got {type(buf).__name__}")
        buf = np.asarray(buf)
    if writable:
        if not buf.flags.c_contiguous:
            raise ValueError(f"{name}: must be C-contiguous to receive into it")
        if not buf.flags.writeable:
            raise ValueError(f"{name}: is read-only")
    elif not buf.flags.c_contiguous:
        buf = np.ascontiguousarray(buf)
    return cast("Array", buf.reshape(-1))


def checked(
    buf: Any, name: str, *, writable: bool = False, size: int | None = None, what: str = "",
    dtype: np.dtype[Any] | None = None,
) -> Array:
    """:func:`flat`, then check the element count (``size``, explained by ``what``) and the
    dtype (that of ``sendbuf``): the one validation every collective makes.

    Examples
    --------
    >>> import numpy as np
    >>> checked(np.zeros(3), "recvbuf", size=4, what="counts sum to 4")
    Traceback (most recent call last):
    ...
    ValueError: recvbuf: has 3 elements, counts sum to 4
    """
    out = flat(buf, name, writable)
    if dtype is not None and out.dtype != dtype:
        raise TypeError(f"{name}: dtype {out.dtype} differs from sendbuf's {dtype}")
    if size is not None and out.shape[0] != size:
        raise ValueError(f"{name}: has {out.shape[0]} elements, {what or f'expected {size}'}")
    return out


def parse_counts(counts: Sequence[int], size: int, name: str) -> tuple[int, ...]:
    """``size`` non-negative block sizes."""
    out = tuple(int(c) for c in counts)
    if len(out) != size or min(out, default=0) < 0:
        raise ValueError(f"{name}: need {size} non-negative block sizes, got {list(out)}")
    return out


def check_root(root: int, size: int) -> int:
    """``root`` as an int in ``[0, size)``."""
    if not 0 <= int(root) < size:
        raise ValueError(f"root: must be in [0, {size}), got {root}")
    return int(root)


def resolve(
    ctx: Context, operation: str, algorithm: str | Mapping[str, str] | None, nbytes: int,
    rop: ReduceOp | None = None,
) -> str:
    """The algorithm to run: the one asked for (or the communicator's default), or ``auto``'s
    choice."""
    choice = algorithm if algorithm is not None else ctx.algorithm
    if choice.__class__ is str and (operation, choice) in TABLE:
        return choice  # the common case, validated
    alg = parse_algorithm(operation, choice)
    if alg == "auto":
        alg = choose(
            operation, nbytes, ctx.size,
            commutative=rop.commutative if rop is not None else True,
            native_op=rop.mpi_name is not None if rop is not None else True,
        )
    return alg


def _check(ctx: Context, name: str, signature: tuple[Any, ...]) -> None:
    """With checking on, every rank verifies that all ranks called the same collective."""
    sigs = ctx.comm.allgather(signature)
    if any(sg != sigs[0] for sg in sigs):
        lines = "; ".join(f"rank {i}: {sg}" for i, sg in enumerate(sigs))
        raise CollectiveError(f"{name}: ranks disagree on the call ({lines})")


def _mode(ctx: Context, progress: str | None) -> tuple[str, bool]:
    """(progress mode, whether a blocking form runs the request at once)."""
    if _LOCAL.__dict__.get("blocking"):
        return "none", True
    return (parse_progress(progress) if progress is not None else ctx.progress), False


class BlockingScope:
    """Inside it, collectives are started for a blocking form: not registered, mode "none";
    the caller completes the request with ``_run()`` (``with blocking_scope():``)."""

    __slots__ = ("_outer",)

    def __enter__(self) -> None:
        self._outer = getattr(_LOCAL, "blocking", False)
        _LOCAL.blocking = True

    def __exit__(self, *exc: object) -> None:
        _LOCAL.blocking = self._outer


def blocking_scope() -> BlockingScope:
    """A :class:`BlockingScope` (the facade's blocking methods start their ``I`` form in it)."""
    return BlockingScope()


def launch(
    ctx: Context, operation: str, args: Args, result: T, *,
    algorithm: str | Mapping[str, str] | None, nbytes: int, progress: str | None,
    timeout: float | None, signature: tuple[Any, ...] = (),
    after: Callable[[], None] | None = None, builders: Mapping[str, Builder] | None = None,
) -> BaseRequest[T]:
    """Resolve the algorithm and start the collective; return its request.

    ``after`` runs on this rank once the collective has completed (the facade unpacks
    strided blocks with it); ``builders`` replace the table's entries of some algorithms
    (the facade's gatherv/scatterv, whose counts only root knows).
    """
    alg = resolve(ctx, operation, algorithm, nbytes, args.op)
    if ctx.check:
        _check(ctx, operation, (operation, *signature))
    mode, run_now = _mode(ctx, progress)
    limit = timeout if timeout is not None else ctx.timeout
    if alg in NODE_ALGORITHMS:
        args = args._replace(nodes=ctx.nodes())
    tag = ctx.next_tag()
    build = builders.get(alg) if builders is not None else None
    plan = (build or TABLE[operation, alg])(args)
    if isinstance(plan, Native):
        return _native(ctx, operation, plan.start, result, mode, limit, run_now, plan.release,
                       after)
    return start_schedule(ctx, plan, result, mode, limit, tag, register=not run_now,
                          after=after)


def start_schedule(
    ctx: Context, schedule: Schedule, result: T, mode: str, timeout: float | None,
    tag: int | None = None, register: bool = True, after: Callable[[], None] | None = None,
) -> Request[T]:
    """Start ``schedule`` on the private communicator with a fresh tag (unless given) and
    hand it to whoever progresses requests of ``mode``; ``after`` runs once it completed."""
    req: Request[T] = Request(schedule, ctx.comm, ctx.next_tag() if tag is None else tag, mode,
                              result, timeout, after)
    req.start()
    if not req.done and register:
        if mode == "thread":
            thread().register(req)
        else:
            ENGINE.register(req)
    return req


def launch_native(
    ctx: Context, name: str, start: Callable[[MPI.Intracomm], MPI.Request], result: T, *,
    progress: str | None, timeout: float | None,
) -> BaseRequest[T]:
    """Start MPI's own collective ``start(private comm)`` as a parvox request (what parvox
    does not schedule itself: the facade's ``Alltoallw``, operators MPI alone knows)."""
    mode, run_now = _mode(ctx, progress)
    ctx.next_tag()  # every collective takes a tag, so the counters agree on every rank
    limit = timeout if timeout is not None else ctx.timeout
    return _native(ctx, name, start, result, mode, limit, run_now, None, None)


def _native(
    ctx: Context, name: str, start: Callable[[MPI.Intracomm], MPI.Request], result: T,
    mode: str, limit: float | None, run_now: bool, release: Callable[[], None] | None,
    after: Callable[[], None] | None,
) -> BaseRequest[T]:
    if run_now and limit is None and ENGINE.idle():
        # a blocking call with nothing else outstanding: MPI's own wait, nothing around it
        try:
            handle = start(ctx.comm)
            try:
                handle.Wait()
            except mpi().Exception as exc:
                raise mpi_failure(name, exc) from exc
            if after is not None:
                after()
        finally:
            if release is not None:
                release()
        return CompletedRequest(result)
    req = NativeRequest(start(ctx.comm), result, name=name, mode=mode, timeout=limit,
                        release=release, after=after)
    if not run_now:
        ENGINE.register(req)
    return req


def blocking(iform: Callable[P, BaseRequest[T]], doc: str) -> Callable[P, T]:
    """The blocking form of ``iform``: the same arguments less ``progress``; runs the
    collective to completion and returns its result (raising its error or timeout)."""
    name = iform.__name__[1:]

    @functools.wraps(iform)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        if "progress" in kwargs:
            raise TypeError(f"{name}() got an unexpected keyword argument 'progress'")
        outer = getattr(_LOCAL, "blocking", False)
        _LOCAL.blocking = True
        try:
            req = iform(*args, **kwargs)
        finally:
            _LOCAL.blocking = outer
        return req._run()

    sig = inspect.signature(iform)
    run.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[p for p in sig.parameters.values() if p.name != "progress"],
        return_annotation=inspect.Signature.empty,
    )
    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    return run
