"""The runtime that executes :class:`~parvox.dataflow.Operation` s on every rank of an MPI job.

Each rank runs, beside its main thread:

* one **communication thread** owning all point-to-point traffic of the runtime on a private
  duplicate of the communicator: it posts the sends queued by other threads (``Isend`` of one
  contiguous ``uint8`` buffer per token, or per batch of up to ``coalesce`` tokens and results
  to one rank), receives tokens, results and control messages
  (``Iprobe`` + ``Recv``; it sleeps briefly when idle rather than spinning) and answers
  heartbeats; message buffers come from the runtime's :class:`~parvox.dataflow.pool.BufferPool`
  and go back to it once sent or handled;
* for every operation, the **stage threads**: stage 0 is fed by the network (or directly, for
  tokens the rank sends itself), stage ``k + 1`` by a bounded queue filled by stage ``k``, so an
  I/O stage reading the next token overlaps a compute stage working on the previous one; the
  last stage's result goes back to the origin; a placed stage (``Stage.rank``, the
  ``placement`` map) gets the token's payload from the rank of the stage before it, and a stage
  that is an :class:`~parvox.dataflow.Operation` drives that nested operation from its thread
  (its own flow-control level, so the outer token never holds a slot the inner tokens need);
* a pool of **dispatcher threads** on the ranks that start operations: each runs one request's
  ``split`` with flow control -- at most ``window`` tokens in flight per destination rank, a token
  that may go to several ranks going to the one with the fewest in flight (shortest queue) --
  and merges results as they arrive, so several requests are in flight at once, each tagged by a
  request id, their results merged in any order;
* on the rank that watches the others (:meth:`Dataflow.start_heartbeat`), a
  :class:`~parvox.dataflow.liveness.Watchdog` pinging them and applying the liveness policy.

MPI must provide ``MPI_THREAD_MULTIPLE`` (mpi4py asks for it by default); the constructor checks
``MPI.Query_thread()``.

Examples
--------
>>> import numpy as np
>>> from parvox.dataflow import Operation, Stage, Token
>>> op = Operation("double", split=lambda n: [Token(0, np.full(3, i)) for i in range(n)],
...                stages=(Stage(lambda a: 2 * a),), merge=lambda acc, r: acc + int(r.sum()),
...                init=lambda n: 0)
>>> with Dataflow([op]) as flow:
...     flow.run("double", 4)
36
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import itertools
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.comm import ParvoxError, get_comm
from parvox.dataflow.liveness import LivenessPolicy, Peers, Watchdog
from parvox.dataflow.operation import Operation, Token, nested_operations
from parvox.dataflow.placement import check_ranks, place
from parvox.dataflow.pool import BufferPool
from parvox.dataflow.wire import pack, pack_in_front, unpack
from parvox.errors import ParameterError
from parvox.tags import DATAFLOW
from parvox.threads import set_native_name

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["Dataflow", "DataflowError", "DataflowTimeout"]

_TAG_TOKEN = DATAFLOW.tag(0)
_TAG_RESULT = DATAFLOW.tag(1)
_TAG_CTRL = DATAFLOW.tag(2)


class DataflowError(ParvoxError):
    """A stage raised while processing a token; raised on the origin after all results came.

    Attributes
    ----------
    operation, stage : str
    rank : int
        Where the stage ran.
    kind : str
        The exception's type name (e.g. ``"ChecksumError"``).
    detail : str
        The exception's message.
    """

    def __init__(self, operation: str, stage: str, rank: int, kind: str, detail: str) -> None:
        super().__init__(
            f"{operation}: stage {stage!r} on rank {rank} failed: {kind}: {detail}"
        )
        self.operation = operation
        self.stage = stage
        self.rank = rank
        self.kind = kind
        self.detail = detail


class DataflowTimeout(ParvoxError):
    """Results of a request did not all arrive in time (a rank died or hangs)."""


@dataclasses.dataclass
class _Item:
    op: str
    rid: int
    seq: int
    origin: int
    payload: Any
    dest: int  # the rank the split sent the token to (its flow-control slot)


_STOP = object()


class _Deadline:
    """A deadline ``timeout`` seconds after the last :meth:`restart` (``None``: never).

    Examples
    --------
    >>> d = _Deadline(None)
    >>> d.expired(), d.left()
    (False, None)
    >>> _Deadline(0.0).expired()
    True
    """

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.restart()

    def restart(self) -> None:
        """Start the ``timeout`` anew (progress was made)."""
        self._at = None if self.timeout is None else time.monotonic() + self.timeout

    def left(self) -> float | None:
        """Seconds until the deadline (0 once past it); ``None`` without a timeout."""
        return None if self._at is None else max(self._at - time.monotonic(), 0.0)

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self._at is not None and time.monotonic() >= self._at


class Dataflow:
    """Run parallel operations (split -> pipelined stages -> merge) over an MPI communicator.

    Collective: every rank constructs it with the same operations, and calls :meth:`close`.

    Parameters
    ----------
    operations : iterable of Operation
    comm : MPI communicator, optional
        Duplicated for the runtime's own traffic; world by default.
    window : int
        Tokens in flight per destination rank from one origin (flow control, >= 1).
    max_requests : int
        Requests one origin runs at once (dispatcher threads); more wait in line.
    status : callable, optional
        ``status() -> dict`` of extra figures this rank reports in heartbeats.
    poll : float
        Longest sleep of the idle communication thread, seconds, while this rank has nothing
        queued; four times longer while it has (a token waits for a stage, or several of its
        requests are in flight): what arrives then is not waited for.
    placement : mapping, optional
        Which rank (and how many threads) runs each stage (:func:`~parvox.dataflow.placement.place`:
        ``{"op/stage": rank}``); by default a stage runs on the rank its token was sent to.
    coalesce : int
        Most tokens and results one MPI message carries to one destination (>= 1; 1: one
        message each). Messages queued for the same rank are sent together.
    coalesce_delay : float
        Seconds a message may wait for others to the same rank before it is sent (>= 0; 0:
        only the messages already queued are coalesced, nothing waits).
    pool : BufferPool, optional
        The message buffers (:attr:`pool`; a new one by default), closed with the runtime.
        Give it when a stage allocates from it: the stages may run before the constructor
        has returned (a token from a rank that finished constructing first), before the
        caller holds the runtime.

    Attributes
    ----------
    max_inflight : list of int
        The most top-level tokens ever in flight to each destination from this rank.
    mpi_sends, messages_sent : int
        MPI sends posted and runtime messages (tokens, results, control) they carried.
    """

    def __init__(
        self,
        operations: Iterable[Operation],
        comm: MPI.Intracomm | None = None,
        window: int = 4,
        max_requests: int = 8,
        status: Callable[[], dict[str, Any]] | None = None,
        poll: float = 0.001,
        placement: Any = None,
        coalesce: int = 1,
        coalesce_delay: float = 0.0,
        pool: BufferPool | None = None,
    ) -> None:
        from mpi4py import MPI

        base = get_comm(comm)
        top = place(operations, placement, base.Get_size())
        check_ranks(top, base.Get_size())
        names = [op.name for op in top]
        if len(set(names)) != len(names):
            raise ValueError(f"operations must have unique names, got {names}")
        # nested operations run on the same runtime: registered too, one flow-control level
        # per nesting depth (a request waits only on slots of its own level, which its level's
        # stages release, so a stage waiting on its nested operation cannot starve it)
        self._level = {op.name: 0 for op in top}
        ops = list(top)
        for op in top:
            for inner in nested_operations(op):
                depth = self._depth(op, inner.name)
                if inner.name in self._level:
                    if all(o.name != inner.name or o == inner for o in ops):
                        self._level[inner.name] = max(self._level[inner.name], depth)
                        continue
                    raise ValueError(f"operations must have unique names, got {inner.name!r} twice")
                self._level[inner.name] = depth
                ops.append(inner)
        if isinstance(coalesce, bool) or not isinstance(coalesce, int) or coalesce < 1:
            raise ParameterError("coalesce", f"coalesce must be an integer >= 1, got {coalesce!r}")
        if not (isinstance(coalesce_delay, int | float) and 0 <= coalesce_delay < float("inf")):
            raise ParameterError(
                "coalesce_delay", f"coalesce_delay must be >= 0 seconds, got {coalesce_delay!r}"
            )
        self.coalesce = coalesce
        self.coalesce_delay = float(coalesce_delay)
        self.mpi_sends = 0
        self.messages_sent = 0
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        if max_requests < 1:
            raise ValueError(f"max_requests must be >= 1, got {max_requests!r}")
        if base.Get_size() > 1 and MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise ParvoxError(
                "parvox.dataflow needs MPI_THREAD_MULTIPLE; initialise MPI with "
                "mpi4py.rc.thread_level = 'multiple' (the default)"
            )
        self.comm = base.Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.ops = {op.name: op for op in ops}
        self.window = window
        self._status_fn = status
        self._poll = float(poll)
        self._outbox: queue.SimpleQueue[tuple[int, int, np.ndarray]] = queue.SimpleQueue()
        # Room in the windows: a token for one rank waits on that rank's condition and is
        # woken alone when a slot there frees (not with every waiting request); tokens with
        # several candidates wait on ``_cond``. All share one lock.
        window_lock = threading.Lock()
        self._cond = threading.Condition(window_lock)
        nlevels = max(self._level.values()) + 1
        self._room = [
            [threading.Condition(window_lock) for _ in range(self.size)] for _ in range(nlevels)
        ]
        self._inflight = [[0] * self.size for _ in range(nlevels)]
        #: most top-level tokens ever in flight to each destination from this rank
        self.max_inflight = [0] * self.size
        self._requests: dict[int, queue.SimpleQueue[Any]] = {}
        self._rids = itertools.count()
        self._stats_lock = threading.Lock()
        self._busy: dict[str, float] = {}
        self._tokens = 0
        # MPI messages posted to and received from each rank: close() receives what is still
        # on the way, so that nothing outlives the communicator (MPICH hands a freed
        # communicator's context id, and its unreceived messages, to the next Dup)
        self._posted_to = [0] * self.size
        self._received_from = [0] * self.size
        self._unfinished_sends: list[Any] = []
        #: what this rank knows of its peers (written by the communication thread and the
        #: watchdog, read by any through snapshots)
        self.peers = Peers(self.rank, self.size)
        #: the message buffers of this runtime (freed by :meth:`close`)
        self.pool = pool if pool is not None else BufferPool()
        self._stop_requested = threading.Event()
        self._comm_stop = threading.Event()
        self._watchdog: Watchdog | None = None
        self._closed = False
        self._queues: dict[str, list[queue.Queue[Any]]] = {}
        self._threads: list[threading.Thread] = []
        for op in ops:
            qs: list[queue.Queue[Any]] = [queue.Queue()]
            # a stage that may be fed over the network (it or the one before is placed) has an
            # unbounded queue: the communication thread must never block (the window bounds it)
            qs += [
                queue.Queue(maxsize=0 if s.rank is not None or prev.rank is not None else s.queue)
                for prev, s in itertools.pairwise(op.stages)
            ]
            self._queues[op.name] = qs
            for k, stage in enumerate(op.stages):
                self._busy[f"{op.name}/{stage.name}"] = 0.0
                for t in range(stage.threads):
                    th = threading.Thread(
                        target=self._stage_loop,
                        args=(op, k),
                        name=f"parvox-{op.name}-{stage.name}-{t}",
                        daemon=True,
                    )
                    th.start()
                    self._threads.append(th)
        self._pool = cf.ThreadPoolExecutor(max_requests, thread_name_prefix="parvox-dispatch",
                                           initializer=set_native_name)
        self._comm_thread = threading.Thread(
            target=self._comm_loop, name="parvox-dataflow-comm", daemon=True
        )
        self._comm_thread.start()

    @staticmethod
    def _depth(op: Operation, name: str, at: int = 0) -> int:
        """The deepest nesting of operation ``name`` under ``op`` (``op`` is depth ``at``)."""
        best = -1
        for s in op.stages:
            if isinstance(s.fn, Operation):
                if s.fn.name == name:
                    best = max(best, at + 1)
                best = max(best, Dataflow._depth(s.fn, name, at + 1))
        return best

    # -- context -------------------------------------------------------------------------------
    def __enter__(self) -> Dataflow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- origin side -------------------------------------------------------------------------------
    def submit(self, name: str, request: Any, timeout: float | None = None) -> cf.Future[Any]:
        """Start operation ``name`` on ``request`` from this rank; a future of its result.

        Parameters
        ----------
        timeout : float, optional
            Seconds the request may go without progress -- waiting for window space to send
            its next token, or for its next result -- before its future raises
            :class:`DataflowTimeout` (a rank died or hangs). No limit by default.
        """
        if self._closed:
            raise ParvoxError("the dataflow runtime is closed")
        if name not in self.ops:
            raise ValueError(f"name must be a registered operation, got {name!r}")
        return self._pool.submit(self._drive, self.ops[name], request, timeout)

    def run(self, name: str, request: Any, timeout: float | None = None) -> Any:
        """:meth:`submit` and wait for the result."""
        return self.submit(name, request, timeout).result()

    def _pick(self, cands: tuple[int, ...], seq: int, level: int = 0) -> int | None:
        # shortest queue among candidates with room in their window; rotate ties by seq
        best = None
        n = len(cands)
        inflight = self._inflight[level]
        for i in range(n):
            c = cands[(seq + i) % n]
            if inflight[c] < self.window and (best is None or inflight[c] < inflight[best]):
                best = c
        return best

    def _drive(self, op: Operation, request: Any, timeout: float | None) -> Any:
        rid = next(self._rids)
        level = self._level[op.name]
        inflight = self._inflight[level]
        results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._requests[rid] = results
        acc = op.init(request)
        sent = got = 0
        errors: list[DataflowError] = []

        def take(item: tuple[int, int, Any, Any]) -> None:
            nonlocal acc, got
            src, _seq, payload, err = item
            got += 1
            if err is not None:
                errors.append(DataflowError(op.name, err[0], src, err[1], err[2]))
            elif not errors:
                acc = op.merge(acc, payload)
                self.pool.give(payload)  # reused once the merge dropped it, if pooled

        def drain() -> bool:
            took = False
            while True:
                try:
                    item = results.get_nowait()
                except queue.Empty:
                    return took
                take(item)
                took = True

        deadline = _Deadline(timeout)
        try:
            for tok in op.split(request):
                if not isinstance(tok, Token):
                    raise TypeError(f"split of {op.name!r} must yield Token objects, got {tok!r}")
                cands = tok.candidates
                for c in cands:
                    if not 0 <= c < self.size:
                        raise ValueError(f"token dest {c} is not a rank of a {self.size}-rank job")
                dest = None
                while dest is None:
                    with self._cond:
                        dest = self._pick(cands, sent, level)
                        if dest is None:
                            left = deadline.left()
                            room = self._room[level][cands[0]] if len(cands) == 1 else self._cond
                            room.wait(0.02 if left is None else min(0.02, left))
                        else:
                            inflight[dest] += 1
                            if level == 0:
                                self.max_inflight[dest] = max(
                                    self.max_inflight[dest], inflight[dest]
                                )
                    if drain():
                        deadline.restart()
                    if dest is None and deadline.expired():
                        who = f"rank {cands[0]}" if len(cands) == 1 else f"ranks {list(cands)}"
                        raise DataflowTimeout(
                            f"{op.name}: no room to send to {who} for {timeout} s "
                            f"({sent - got} of {sent} results missing)"
                        )
                self._send_token(_Item(op.name, rid, sent, self.rank, tok.payload, dest), 0)
                sent += 1
                drain()
            deadline.restart()
            while got < sent:
                try:
                    take(results.get(timeout=deadline.left()))
                except queue.Empty:
                    raise DataflowTimeout(
                        f"{op.name}: {sent - got} of {sent} results missing after {timeout} s"
                    ) from None
                deadline.restart()
        finally:
            self._requests.pop(rid, None)
        if errors:
            raise errors[0]
        return op.finish(acc)

    def _send_token(self, item: _Item, k: int) -> None:
        """Send ``item`` to stage ``k`` of its operation, on the rank running that stage."""
        placed = self.ops[item.op].stages[k].rank
        to = item.dest if placed is None else placed
        if to == self.rank:
            self._queues[item.op][k].put(item)
        else:
            head = {"op": item.op, "rid": item.rid, "seq": item.seq, "origin": item.origin,
                    "dest": item.dest, "stage": k}
            self._outbox.put((to, _TAG_TOKEN, pack(head, item.payload, self.pool.take)))
            self.pool.give(item.payload)  # an intermediate in a pooled buffer: copied

    def _deliver(
        self, op: str, dest: int, src: int, rid: int, seq: int, payload: Any, err: Any
    ) -> None:
        level = self._level.get(op, 0)
        with self._cond:
            self._inflight[level][dest] -= 1
            self._room[level][dest].notify()
            self._cond.notify_all()
        results = self._requests.get(rid)
        if results is not None:
            results.put((src, seq, payload, err))

    # -- destination side --------------------------------------------------------------------------
    def _stage_loop(self, op: Operation, k: int) -> None:
        set_native_name()
        stage = op.stages[k]
        qs = self._queues[op.name]
        key = f"{op.name}/{stage.name}"
        last = k == len(op.stages) - 1
        while True:
            item = qs[k].get()
            if item is _STOP:
                return
            t0 = time.perf_counter()
            err = None
            try:
                if isinstance(stage.fn, Operation):  # a nested operation, driven from here
                    out = self._drive(stage.fn, item.payload, None)
                else:
                    out = stage.fn(item.payload)
            except Exception as exc:  # reported to the origin, the runtime goes on
                out, err = None, (stage.name, type(exc).__name__, str(exc))
            with self._stats_lock:
                self._busy[key] += time.perf_counter() - t0
                if last or err is not None:
                    self._tokens += 1
            if err is None and not last:
                item.payload = out
                nxt = op.stages[k + 1].rank
                if (item.dest if nxt is None else nxt) == self.rank:
                    qs[k + 1].put(item)
                else:
                    self._send_token(item, k + 1)
            else:
                self._send_result(item, out, err)

    def _send_result(self, item: _Item, out: Any, err: Any) -> None:
        if item.origin == self.rank:
            self._deliver(item.op, item.dest, self.rank, item.rid, item.seq, out, err)
            return
        head = {"op": item.op, "dest": item.dest, "rid": item.rid, "seq": item.seq, "err": err}
        try:
            # a result built in pool.take_message leaves as it is, its header written in the
            # room in front (the buffer goes back to the pool once sent); any other is copied
            room = self.pool.room(out)  # (0 for anything but such a buffer)
            buf = pack_in_front(head, out, room) if room else None
            if buf is None:
                buf = pack(head, out, self.pool.take)
                self.pool.give(out)  # a stage's result in a pooled buffer: copied, reusable
        except Exception as exc:  # an unpackable result becomes an error
            head["err"] = ("(send)", type(exc).__name__, str(exc))
            buf = pack(head, None)
        self._outbox.put((item.origin, _TAG_RESULT, buf))

    # -- communication thread ----------------------------------------------------------------------
    def _comm_loop(self) -> None:
        from mpi4py import MPI

        set_native_name()
        comm = self.comm
        status = MPI.Status()
        pending: list[tuple[Any, np.ndarray]] = []
        # coalescing: tokens and results held per destination, with when the first was held
        held: dict[int, list[tuple[int, np.ndarray]]] = {}
        since: dict[int, float] = {}
        idle = 0
        waited: tuple[int, int, np.ndarray] | None = None  # what ended the last idle wait

        def post(dest: int, tag: int, buf: np.ndarray) -> None:
            pending.append((comm.Isend([buf, MPI.BYTE], dest, tag), buf))
            self.mpi_sends += 1
            self._posted_to[dest] += 1

        def flush(dest: int) -> None:
            msgs = held.pop(dest)
            since.pop(dest)
            if len(msgs) == 1:
                post(dest, *msgs[0])
                return
            head = {"ctl": "batch", "tags": [t for t, _ in msgs]}
            post(dest, _TAG_CTRL, pack(head, [b for _, b in msgs], self.pool.take))
            for _, b in msgs:
                self.pool.give(b)

        while True:
            active = False
            while True:
                if waited is not None:
                    (dest, tag, buf), waited = waited, None
                else:
                    try:
                        dest, tag, buf = self._outbox.get_nowait()
                    except queue.Empty:
                        break
                self.messages_sent += 1
                if self.coalesce > 1 and tag != _TAG_CTRL:
                    held.setdefault(dest, []).append((tag, buf))
                    since.setdefault(dest, time.monotonic())
                    if len(held[dest]) >= self.coalesce:
                        flush(dest)
                else:
                    post(dest, tag, buf)
                active = True
            if held:
                now = time.monotonic()
                for dest in [d for d, t in since.items() if now - t >= self.coalesce_delay]:
                    flush(dest)
            while comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status):
                src, tag = status.Get_source(), status.Get_tag()
                buf = self.pool.take(status.Get_count(MPI.BYTE))
                comm.Recv([buf, MPI.BYTE], src, tag)
                self._received_from[src] += 1
                try:
                    self._on_message(src, tag, buf)
                except Exception as exc:  # never let one bad message stop the runtime
                    sys.stderr.write(f"parvox.dataflow: rank {self.rank}: bad message: {exc!r}\n")
                self.pool.give(buf)  # reused once the views the handler kept are gone
                del buf
                active = True
            if pending:  # one MPI call for all (each call lets another thread take the GIL)
                done = MPI.Request.Testsome([r for r, _ in pending])
                if done:
                    for i in done:
                        self.pool.give(pending[i][1])
                    gone = set(done)
                    pending = [p for i, p in enumerate(pending) if i not in gone]
            if self._comm_stop.is_set() and not held and self._outbox.empty():
                # sends still in flight are close()'s: a large one completes only once its
                # receiver takes it, and that rank's communication thread may be gone already
                self._unfinished_sends = [r for r, _ in pending]
                return
            if active:
                idle = 0
            else:
                # Idle: wait for something to send (which ends the wait at once) or until the
                # next probe, backing off from 200 us to ``poll`` (x4 a time; 4 x ``poll``
                # with work queued). Probing more often cost the busy server a tenth of a core
                # per rank: every wake-up is a context switch and takes the GIL from the
                # stages. Held messages bound the wait.
                idle += 1
                wait = 5e-5 * (1 << min(2 * idle, 20))
                if wait > self._poll:
                    wait = min(wait, self._poll_cap())
                if since:
                    due = min(since.values()) + self.coalesce_delay - time.monotonic()
                    wait = max(min(wait, due), 0.0)
                try:
                    waited = self._outbox.get(timeout=wait) if wait > 0 else None
                except queue.Empty:
                    pass

    def _poll_cap(self) -> float:
        """The longest idle wait of the communication thread now: ``poll``, or four times it
        while this rank has work queued (a stage's queue is not empty, or more than one of its
        requests is in flight), so that a busy rank is not woken for messages it would only
        queue (each wake-up is a context switch and takes the GIL from the stages)."""
        if len(self._requests) > 1 or any(
            q.qsize() for qs in self._queues.values() for q in qs
        ):
            return 4 * self._poll
        return self._poll

    def _on_message(self, src: int, tag: int, buf: np.ndarray) -> None:
        head, payload = unpack(buf)
        self.peers.heard(src)
        if tag == _TAG_TOKEN:
            item = _Item(head["op"], head["rid"], head["seq"], head["origin"], payload,
                         head["dest"])
            k = head["stage"]
            if item.op not in self._queues or not 0 <= k < len(self._queues[item.op]):
                self._send_result(item, None, ("(route)", "KeyError", f"no operation {item.op!r}"))
            else:
                self._queues[item.op][k].put(item)
        elif tag == _TAG_RESULT:
            self._deliver(head["op"], head["dest"], src, head["rid"], head["seq"], payload,
                          head["err"])
        elif tag == _TAG_CTRL:
            kind = head["ctl"]
            if kind == "batch":  # several messages coalesced into one (``coalesce``)
                for sub_tag, sub in zip(head["tags"], payload, strict=True):
                    self._on_message(src, sub_tag, sub)
            elif kind == "ping":
                self._control(src, "pong", status=self.status())
            elif kind == "pong":
                self.peers.answered(src, head["status"])
            elif kind == "stop":
                self._stop_requested.set()

    def _control(self, dest: int, kind: str, **fields: Any) -> None:
        self._outbox.put((dest, _TAG_CTRL, pack({"ctl": kind, **fields}, None)))

    # -- liveness and statistics -------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """This rank's figures: pid, host, busy seconds per stage, tokens done, messages sent
        and the MPI sends that carried them (fewer with ``coalesce``), extras."""
        with self._stats_lock:
            busy = dict(self._busy)
            tokens = self._tokens
        out: dict[str, Any] = {
            "rank": self.rank,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "busy_s": busy,
            "tokens": tokens,
            "messages": {"sent": self.messages_sent, "mpi_sends": self.mpi_sends},
        }
        if self._status_fn is not None:
            out.update(self._status_fn())
        return out

    @property
    def last_seen(self) -> dict[int, float]:
        """A snapshot: ``time.monotonic()`` when each rank was last heard from."""
        return self.peers.last_seen

    @property
    def rank_status(self) -> dict[int, dict[str, Any]]:
        """A snapshot: each other rank's :meth:`status` from its latest heartbeat answer."""
        return self.peers.status

    @property
    def dead(self) -> frozenset[int]:
        """A snapshot: the ranks found dead (:meth:`mark_dead`)."""
        return self.peers.dead

    def mark_dead(self, rank: int) -> None:
        """Record that ``rank`` is dead: it is not pinged again and :meth:`silent_ranks`
        reports it at once (thread-safe)."""
        self.peers.mark_dead(rank)

    def ping(self, rank: int) -> None:
        """Ask ``rank`` for its :meth:`status` (the answer updates :attr:`peers`)."""
        self._control(rank, "ping")

    def start_heartbeat(
        self,
        interval: float = 0.5,
        policy: LivenessPolicy | None = None,
        on_dead: Callable[[int, float, int | None], None] | None = None,
    ) -> None:
        """Ping every other rank each ``interval`` seconds (their answers carry :meth:`status`)
        and apply ``policy`` (:class:`~parvox.dataflow.liveness.LivenessPolicy`: a rank whose
        local process is gone, or silent for ``dead_after`` seconds, is dead) in a
        :class:`~parvox.dataflow.liveness.Watchdog`; see :meth:`silent_ranks`. Usually called
        on the one rank that serves clients; a second call does nothing.

        Parameters
        ----------
        on_dead : callable, optional
            ``on_dead(rank, silence, pid)``, called once, for the first rank found dead.
        """
        if self._watchdog is not None:
            return
        self._watchdog = Watchdog(
            self.peers, self.ping, policy or LivenessPolicy(), interval, on_dead
        )

    def silent_ranks(self, after: float) -> dict[int, float]:
        """Ranks not heard from for more than ``after`` seconds, with their silence
        (``inf`` for a rank found dead)."""
        return self.peers.silent(after)

    # -- shutdown ----------------------------------------------------------------------------------
    def stop_all(self) -> None:
        """Ask every other rank's :meth:`serve_forever` to return."""
        for r in range(self.size):
            if r != self.rank:
                self._control(r, "stop")
        self._stop_requested.set()

    def serve_forever(self) -> None:
        """Serve tokens until some rank calls :meth:`stop_all`."""
        while not self._stop_requested.wait(0.5):
            pass

    def _receive_the_rest(self) -> None:
        """Receive, and drop, the messages still on their way to this rank, and finish this
        rank's own sends (collective; the communication threads have stopped, so no rank
        posts any more): a reply to a request that timed out, an answer to a last ping. Every
        rank learns how many messages each other rank posted to it and receives until it has
        them all."""
        from mpi4py import MPI

        expected = self.comm.alltoall(self._posted_to)
        status = MPI.Status()
        for src, count in enumerate(expected):
            while self._received_from[src] < count:
                self.comm.Probe(src, MPI.ANY_TAG, status)
                buf = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
                self.comm.Recv([buf, MPI.BYTE], src, status.Get_tag())
                self._received_from[src] += 1
        MPI.Request.Waitall(self._unfinished_sends)
        self._unfinished_sends = []

    def close(self) -> None:
        """Stop the runtime (collective): ask every other rank's :meth:`serve_forever` to
        return (as :meth:`stop_all`), wait for every rank, stop all threads, free the
        runtime's duplicate communicator and its message buffers."""
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.stop()
        # close is collective: a rank leaving early (an error on the serving rank before its
        # stop_all) must not leave the others in serve_forever, waiting for a stop that never
        # comes while it waits for them in the barrier; the extra stops are drained below
        self.stop_all()
        self._pool.shutdown(wait=True)
        self.comm.Barrier()
        for name, op in self.ops.items():
            for k, stage in enumerate(op.stages):
                for _ in range(stage.threads):
                    self._queues[name][k].put(_STOP)
        for th in self._threads:
            th.join()
        self._comm_stop.set()
        self._comm_thread.join()
        self._receive_the_rest()
        self.comm.Free()
        self.pool.close()
