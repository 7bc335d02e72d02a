"""The small runtime that translated ``#$spmd`` programs call (the seed's SPMDlib, in Python).

A translated program does ``from parvox.spmd.runtime import spmd`` and calls methods of that one
:class:`Runtime`; each directive becomes one or two calls, and each call is a thin layer over
parvox: loops over :mod:`parvox.loops`, row transfers and reductions over
:mod:`parvox.spmd.transfers` (which uses :mod:`parvox.collectives`), timers over
:class:`parvox.comm.Timers`.

The runtime's state is the seed's ``spmd.h`` common block: ``spmd.rank`` (``spmd_myid``),
``spmd.size`` (``spmd_nprocs``), ``spmd.is_root``, the part of the last split array
``spmd.mystart``/``spmd.myend``/``spmd.mypart`` (``myend`` is exclusive, as in ``range``) and
the timers ``spmd.time``/``spmd.ttime`` (seconds of the last start/stop pair, on the root).
A program may read them, though a program that does no longer runs unchanged serially.

Beyond the seed's library: ``ncpus_begin``/``ncpus_end`` run an ``ncpus=n`` section on the
first ranks (a sub-communicator), ``section``/``parblock_end`` run a ``parblock``'s independent
sections one rank each, and ``set_root_share`` gives the root a lighter share of every split
(strategy A); each ends by giving every rank the values the section assigned.

Examples
--------
>>> import numpy as np
>>> rt = Runtime()
>>> rt.init()
>>> out = np.zeros((5, 2))
>>> for i in rt.my_range(range(1, 4), out):
...     out[i] = i
>>> rt.mystart, rt.myend, out[:, 0].tolist()
(0, 5, [0.0, 1.0, 2.0, 3.0, 0.0])
>>> (hi,) = rt.roa("max", 7)
>>> hi
7
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from parvox import loops
from parvox._text import plural
from parvox._validate import parse_int
from parvox.comm import ParvoxError, Timers, get_comm, private_comm
from parvox.spmd import transfers

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["Runtime", "RuntimeEnded", "spmd"]


class RuntimeEnded(ParvoxError):
    """A directive ran after ``#$spmd end``."""


class Runtime:
    """The state and operations behind the directives of one program.

    Parameters
    ----------
    comm : MPI.Intracomm, optional
        The ranks that run the program (world by default).
    """

    def __init__(self, comm: MPI.Intracomm | None = None) -> None:
        self._comm_arg = comm
        self.reset()

    def reset(self) -> None:
        """Forget everything a previous program left (parts, timers, ``end``); no communication.

        A process that runs several translated programs one after the other (the runner of
        ``parvox spmd run``, tests) resets the runtime before each.
        """
        self._comm: MPI.Intracomm | None = None
        self._ended = False
        self.rank = 0
        self.size = 1
        self.is_root = True
        self.mystart = 0
        self.myend = 0
        self.mypart = 0
        self.time = 0.0
        self.ttime = 0.0
        self.timers = Timers(self._comm_arg)
        self._running: dict[str, tuple[AbstractContextManager[None], float]] = {}
        self.root_share = 1.0
        # while an ncpus section runs: the whole job's communicator and its rank and size
        self._outer: tuple[MPI.Intracomm, int, int] | None = None

    # -- INIT, END, BARRIER ---------------------------------------------------------------
    def init(self) -> None:
        """Start the runtime: MPI, ``rank``, ``size``, ``is_root`` (``#$spmd init``).

        Calling it again does nothing (after ``end`` it starts afresh); every other method
        calls it first if needed.
        """
        if self._ended:
            self.reset()
        if self._comm is None:
            c = get_comm(self._comm_arg)
            self._comm = c
            self.rank, self.size = c.Get_rank(), c.Get_size()
            self.is_root = self.rank == 0
            self.timers = Timers(c)
            private_comm(c)  # collective: create it now, while every rank is here

    @property
    def comm(self) -> MPI.Intracomm:
        """The communicator (starting the runtime if needed)."""
        if self._ended:
            raise RuntimeEnded("a directive ran after #$spmd end")
        self.init()
        assert self._comm is not None
        return self._comm

    def end(self) -> None:
        """Wait for every rank and finish (``#$spmd end``); later directives are an error."""
        self.comm.Barrier()
        self._ended = True

    def barrier(self) -> None:
        """Wait until every rank gets here (``#$spmd barrier``)."""
        self.comm.Barrier()

    def expect_ranks(self, *, tcpus: int | None = None, ncpus: int | None = None) -> None:
        """Warn (on the root) when the job does not have the rank count a program expects.

        ``tcpus=n``: the program was written for ``n`` ranks; ``ncpus=n``: it should use ``n``.
        """
        c = self.comm
        for name, want in (("tcpus", tcpus), ("ncpus", ncpus)):
            if want is not None and want != self.size and c.Get_rank() == 0:
                sys.stderr.write(
                    f"parvox spmd: warning: {name}={want}: the program expects {want} ranks, "
                    f"the job has {self.size}\n"
                )

    def set_root_share(self, root_share: float) -> None:
        """Give the root ``root_share`` of an equal share of every split (``root_share=f``).

        The seed's strategy A: a root that also distributes and collects computes less. Every
        later loop and transfer of parts splits the rows by :func:`parvox.loops.share_sizes`,
        so the parts of the arrays and the loops agree; halo rows need the even split.
        """
        self.root_share = loops.parse_root_share(root_share)

    # -- NCPUS: a section on fewer ranks --------------------------------------------------
    def ncpus_begin(self, n: int) -> bool:
        """Start an ``ncpus=n`` section: whether this rank runs it (one of the first ``n``).

        The first ``n`` ranks run the section on their own communicator (``comm.Split``), so
        every directive inside splits and communicates among them; the others skip it and
        wait in :meth:`ncpus_end`. ``n`` larger than the job: every rank runs it (a warning).
        """
        n = parse_int(n, "ncpus", minimum=1)
        if self._outer is not None:
            raise ValueError("ncpus: an ncpus section is already running; close it first")
        c = self.comm
        rank, size = c.Get_rank(), c.Get_size()
        if n > size and rank == 0:
            sys.stderr.write(
                f"parvox spmd: warning: ncpus={n}: the job has {plural(size, 'rank')}; "
                "the section runs on all of them\n"
            )
        self._outer = (c, rank, size)
        if n >= size:
            return True
        from mpi4py import MPI

        sub = cast("MPI.Intracomm", c.Split(0 if rank < n else MPI.UNDEFINED, rank))
        if rank >= n:
            return False
        self._comm = sub
        self.rank, self.size = sub.Get_rank(), sub.Get_size()
        private_comm(sub)  # collective over the section's ranks: create it now
        return True

    def ncpus_end(self, values: Callable[[], tuple[Any, ...]] | None = None) -> tuple[Any, ...]:
        """End an ``ncpus`` section: free its communicator; every rank gets the root's values.

        ``values`` returns what the section assigned; the root calls it and broadcasts the
        result to every rank of the job (the other ranks never call it), so after the section
        every rank holds the serial values, as with any number of ranks.
        """
        if self._outer is None:
            raise ValueError("ncpus: no ncpus section is running")
        outer, rank, size = self._outer
        self._outer = None
        if self._comm is not outer:
            if self._comm is not None:
                self._comm.Free()  # the section's communicator, and its private duplicate
            self._comm = outer
        self.rank, self.size = rank, size
        if values is None:
            outer.Barrier()
            return ()
        mine = values() if rank == 0 else None
        return tuple(private_comm(outer).bcast(mine, root=0))

    # -- PARBLOCK: independent sections ---------------------------------------------------
    def section(self, k: int) -> bool:
        """Whether this rank runs section ``k`` of a ``parblock`` (rank ``k % size`` does)."""
        k = parse_int(k, "k", minimum=0)
        return k % self.comm.Get_size() == self.comm.Get_rank()

    def parblock_end(self, *values: Callable[[], tuple[Any, ...]]) -> tuple[Any, ...]:
        """End a ``parblock``: every rank gets what each section assigned, in section order.

        ``values[k]`` returns the variables section ``k`` assigned; the rank that ran the
        section calls it. One allgather brings every section's values to every rank.
        """
        c = self.comm
        rank, size = c.Get_rank(), c.Get_size()
        mine = {k: get() for k, get in enumerate(values) if k % size == rank}
        table: dict[int, tuple[Any, ...]] = {}
        for got in private_comm(c).allgather(mine):
            table.update(got)
        return tuple(v for k in range(len(values)) for v in table[k])

    # -- parts and loops ------------------------------------------------------------------
    def split(self, n: int) -> range:
        """This rank's part of ``range(n)``; sets ``mystart``, ``myend``, ``mypart``.

        The divmod split, or with :meth:`set_root_share` the root's lighter part.
        """
        self.mystart, self.myend = loops.share_extent(
            n, self.comm.Get_size(), self.comm.Get_rank(), self.root_share
        )
        self.mypart = self.myend - self.mystart
        return range(self.mystart, self.myend)

    def my_range(self, iterations: range, *arrays: Any) -> range:
        """The iterations of a ``dopar`` loop this rank runs: those in its part of the arrays' rows.

        Every array named must have the same number of rows (the loop splits by them).
        """
        lengths = {len(a) for a in arrays}
        if len(lengths) != 1:
            sizes = ", ".join(str(len(a)) for a in arrays)
            raise ValueError(
                f"dopar: the loop indexes arrays with different row counts ({sizes}); "
                "name the one whose rows split the loop: dopar[name]"
            )
        n = lengths.pop()
        self.split(n)
        r = iterations
        return loops.dopar(
            r.start, r.stop, r.step, rows=n, root_share=self.root_share, comm=self.comm
        )

    def dyn_range(
        self, iterations: range, array: np.ndarray, chunk: int, root_works: bool = True
    ) -> Iterator[int]:
        """The iterations of a ``dodyn`` loop this rank is handed; the root's array ends complete.

        ``root_works=False`` (``dodyn[c, a, root_works=False]``): the root only serves chunks.
        """
        return loops.dodyn_range(
            iterations, array, chunk=chunk, root_works=root_works, comm=self.comm
        )

    def pipe_range(self, iterations: range, array: np.ndarray, carry: int) -> Iterator[int]:
        """The iterations of a ``pipe`` loop, after the ``carry`` rows above this rank's part."""
        self.split(len(array))
        return loops.pipe(
            array, iterations, carry=carry, root_share=self.root_share, comm=self.comm
        )

    def pipe_tiles(
        self, iterations: range, columns: range, array: np.ndarray, carry: int, chunk: int
    ) -> Iterator[tuple[range, range]]:
        """The (rows, columns) tiles of a ``pipe`` loop nest run as a wavefront."""
        self.split(len(array))
        return loops.pipe_tiles(
            array,
            iterations,
            columns,
            chunk=chunk,
            carry=carry,
            root_share=self.root_share,
            comm=self.comm,
        )

    # -- RONLY: timers and printing -------------------------------------------------------
    def toggle_timer(self, name: str) -> None:
        """Start or stop timer ``name`` (``"time"`` or ``"ttime"``) on the root (``time!``).

        Stopping sets ``spmd.<name>`` to the seconds since the start; :attr:`timers` adds up
        every start/stop pair (``spmd.timers.local()``).
        """
        if name not in ("time", "ttime"):
            raise ValueError(f"name must be 'time' or 'ttime', got {name!r}")
        if self.comm.Get_rank() != 0:
            return
        running = self._running.pop(name, None)
        if running is None:
            block: AbstractContextManager[None] = self.timers(name)
            self._running[name] = (block, self.timers.local().get(name, 0.0))
            block.__enter__()
        else:
            running[0].__exit__(None, None, None)
            before = running[1]
            setattr(self, name, self.timers.local()[name] - before)

    def print(self, *items: Any) -> None:
        """Print ``items`` on the root, to stderr (``print[...]``).

        Directive output goes to stderr so that a program's own output (stdout) is the same
        whether it runs serially or translated.
        """
        if self.comm.Get_rank() == 0:
            print(*items, file=sys.stderr, flush=True)

    # -- R2A, A2R, A2A --------------------------------------------------------------------
    def r2a(self, *values: Any) -> tuple[Any, ...]:
        """Every rank gets the root's values (``r2a[a, b]``), all in one message."""
        return tuple(private_comm(self.comm).bcast(values, root=0))

    def r2a_entire(self, array: np.ndarray) -> None:
        """Every rank gets the root's entire ``array`` (``r2a[E: a]``), in place."""
        transfers.bcast_entire(array, comm=self.comm)

    def r2a_part(self, array: np.ndarray, halo: int = 0, cyclic: bool = False) -> None:
        """Every rank gets its part of the root's ``array`` and ``halo`` rows a side (``r2a[P...]``)."""
        self.split(len(array))
        transfers.scatter_parts(array, halo, cyclic, comm=self.comm, root_share=self.root_share)

    def a2r_part(self, array: np.ndarray) -> None:
        """The root gets every rank's part of ``array`` (``a2r[P: a]``), in place."""
        self.split(len(array))
        transfers.gather_parts(array, comm=self.comm, root_share=self.root_share)

    def a2a_entire(self, array: np.ndarray) -> None:
        """Every rank gets every part of ``array`` (``a2a[E: a]``), in place."""
        self.split(len(array))
        transfers.allgather_parts(array, comm=self.comm, root_share=self.root_share)

    def a2a_halo(self, array: np.ndarray, halo: int, cyclic: bool = False) -> None:
        """Every rank gets the ``halo`` rows around its part from their owners (``a2a[P(X=n)]``)."""
        self.split(len(array))
        transfers.exchange_halo(array, halo, cyclic, comm=self.comm, root_share=self.root_share)

    # -- RoR, RoA -------------------------------------------------------------------------
    def ror(self, ops: str, *values: Any) -> tuple[Any, ...]:
        """Reduce on the root (``ror[OP: ...]``); ``ops`` holds one operation per value.

        Returns the values to rebind: on the root the reduced ones (arrays reduced in place),
        elsewhere the local ones unchanged.
        """
        return tuple(transfers.reduce_values(_ops(ops, values), values, root=0, comm=self.comm))

    def roa(self, ops: str, *values: Any) -> tuple[Any, ...]:
        """Reduce on all ranks (``roa[OP: ...]``); every rank gets the reduced values."""
        return tuple(transfers.reduce_values(_ops(ops, values), values, comm=self.comm))

    def ror_into(self, op: str, source: Any, into: Any) -> Any:
        """``ror[OP: IN=a, OUT=b]``: the root gets the reduction of ``a`` in ``b``; returns ``b``."""
        return self._into(op, source, into, 0)

    def roa_into(self, op: str, source: Any, into: Any) -> Any:
        """``roa[OP: IN=a, OUT=b]``: every rank gets the reduction of ``a`` in ``b``."""
        return self._into(op, source, into, None)

    def _into(self, op: str, source: Any, into: Any, root: int | None) -> Any:
        c = self.comm
        array = isinstance(source, np.ndarray) and source.ndim > 0
        work = np.array(source, copy=True) if array else source
        (result,) = transfers.reduce_values([op], [work], root=root, comm=c)
        if root is not None and c.Get_rank() != root:
            return into
        if array:
            if not isinstance(into, np.ndarray) or into.shape != work.shape:
                raise ValueError(f"OUT: must be an array of shape {work.shape} like IN")
            into[...] = result
            return into
        return result


def _ops(ops: str, values: tuple[Any, ...]) -> list[str]:
    names = ops.split()
    if len(names) != len(values):
        raise ValueError(f"ops: {len(names)} operations for {len(values)} values")
    return names


#: The runtime translated programs use.
spmd = Runtime()
