"""The collectives facade at 5, 8, 13 and 16 ranks: every operation, blocking and ``I`` form,
with every algorithm choice, equals MPI's own collective on the same buffers; and
``redistribute`` between layouts with ranks without blocks, more blocks than ranks and 1-plane
blocks equals NumPy's transpose/crop/pad."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from parvox.testing import mpi_tests
from tests.scale._layouts import SCALE_RANKS, check, layouts


def _operations(p: int, r: int) -> dict[str, Callable[[Any], list[np.ndarray]]]:
    """Operation name -> a call of it on a communicator returning the buffers it filled
    (uneven counts, a root that is neither the first nor the last rank)."""
    from mpi4py import MPI

    root = p - 2
    n = 3
    x = np.arange(n, dtype=np.float64) * (r + 1) - 2.5 * r
    counts = [i % 3 + 1 for i in range(p)]  # Gatherv/Allgatherv: rank i sends counts[i]
    displs = list(np.cumsum([0, *counts[:-1]]))
    mine = np.full(counts[r], float(r))
    a2a_counts = [(r + i) % 3 for i in range(p)]  # Alltoallv: r sends (r + i) % 3 to i
    a2a_recv = [(i + r) % 3 for i in range(p)]

    def v(c: list[int]) -> tuple[list[int], list[int]]:
        return c, [int(d) for d in np.cumsum([0, *c[:-1]])]

    def barrier(c: Any) -> list[np.ndarray]:
        c.Barrier()
        return []

    def bcast(c: Any) -> list[np.ndarray]:
        b = x.copy() if r == root else np.zeros(n)
        c.Bcast(b, root=root)
        return [b]

    def gather(c: Any) -> list[np.ndarray]:
        g = np.zeros((p, n))
        c.Gather(x, g if r == root else None, root=root)
        return [g if r == root else np.zeros(0)]

    def gatherv(c: Any) -> list[np.ndarray]:
        g = np.zeros(sum(counts))
        c.Gatherv(mine, [g, (counts, displs), MPI.DOUBLE] if r == root else None, root=root)
        return [g if r == root else np.zeros(0)]

    def scatter(c: Any) -> list[np.ndarray]:
        out = np.zeros(n)
        c.Scatter(np.arange(p * n, dtype=np.float64) if r == root else None, out, root=root)
        return [out]

    def scatterv(c: Any) -> list[np.ndarray]:
        out = np.zeros(counts[r])
        send = [np.arange(sum(counts), dtype=np.float64), v(counts), MPI.DOUBLE]
        c.Scatterv(send if r == root else None, out, root=root)
        return [out]

    def allgather(c: Any) -> list[np.ndarray]:
        g = np.zeros((p, n))
        c.Allgather(x, g)
        return [g]

    def allgatherv(c: Any) -> list[np.ndarray]:
        g = np.zeros(sum(counts))
        c.Allgatherv(mine, [g, v(counts), MPI.DOUBLE])
        return [g]

    def alltoall(c: Any) -> list[np.ndarray]:
        out = np.zeros(p * 2, np.int64)
        c.Alltoall(np.arange(p * 2, dtype=np.int64) + 100 * r, out)
        return [out]

    def alltoallv(c: Any) -> list[np.ndarray]:
        send = np.arange(sum(a2a_counts), dtype=np.int64) + 100 * r
        out = np.zeros(sum(a2a_recv), np.int64)
        c.Alltoallv([send, v(a2a_counts), MPI.INT64_T], [out, v(a2a_recv), MPI.INT64_T])
        return [out]

    def reduce(c: Any) -> list[np.ndarray]:
        out = np.zeros(n)
        c.Reduce(x, out if r == root else None, op=MPI.SUM, root=root)
        return [out if r == root else np.zeros(0)]

    def allreduce(c: Any) -> list[np.ndarray]:
        out, big = np.zeros(n), np.full(2 * p + 1, float(r))
        c.Allreduce(x, out, op=MPI.MAX)
        c.Allreduce(MPI.IN_PLACE, big, op=MPI.SUM)
        return [out, big]

    def reduce_scatter_block(c: Any) -> list[np.ndarray]:
        out = np.zeros(2)
        c.Reduce_scatter_block(np.arange(2 * p, dtype=np.float64) * (r + 1), out, op=MPI.SUM)
        return [out]

    def reduce_scatter(c: Any) -> list[np.ndarray]:
        out = np.zeros(counts[r])
        c.Reduce_scatter(np.arange(sum(counts), dtype=np.float64) + r, out, counts, op=MPI.SUM)
        return [out]

    def scan(c: Any) -> list[np.ndarray]:
        out = np.zeros(n)
        c.Scan(x, out, op=MPI.SUM)
        return [out]

    def exscan(c: Any) -> list[np.ndarray]:
        out = np.zeros(n)
        c.Exscan(x, out, op=MPI.SUM)
        return [out if r > 0 else np.zeros(0)]  # undefined on rank 0

    return {f.__name__: f for f in (
        barrier, bcast, gather, gatherv, scatter, scatterv, allgather, allgatherv, alltoall,
        alltoallv, reduce, allreduce, reduce_scatter_block, reduce_scatter, scan, exscan)}


class _Nonblocking:
    """A communicator whose blocking methods call its ``I`` methods and wait."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm

    def __getattr__(self, name: str) -> Callable[..., None]:
        start = getattr(self.comm, "I" + name[0].lower() + name[1:])

        def run(*args: Any, **kwargs: Any) -> None:
            assert start(*args, **kwargs).Wait() is True

        return run


def run_facade(quick: bool = False) -> None:
    """Every operation, both forms, every algorithm choice (``quick``: ``auto`` and ``linear``)."""
    from mpi4py import MPI

    from parvox.collectives import Intracomm
    from parvox.collectives.algorithms import ALGORITHMS

    world = MPI.COMM_WORLD
    p, r = world.Get_size(), world.Get_rank()
    operations = _operations(p, r)
    want = {name: call(world) for name, call in operations.items()}
    names = ["auto", *sorted({a for algs in ALGORITHMS.values() for a in algs})]
    if quick:
        names = ["auto", "linear"]
    for name in names:
        choice = name if name == "auto" else {
            op: name for op, algs in ALGORITHMS.items() if name in algs}
        comm = Intracomm(world, algorithm=choice, progress="test", timeout=60)
        for form, c in (("blocking", comm), ("I", _Nonblocking(comm))):
            for op, call in operations.items():
                case = f"{form} {op} with {name} at {p} ranks, rank {r}"
                got = call(c)
                assert len(got) == len(want[op]), case
                for g, w in zip(got, want[op], strict=True):
                    np.testing.assert_array_equal(g, w, err_msg=case)


def run_redistribute(quick: bool = False) -> None:
    """Every layout into every other (``quick``: from one layout)."""
    from mpi4py import MPI

    from parvox.distarray import DistArray
    from parvox.redistribution import redistribute

    size = MPI.COMM_WORLD.Get_size()
    shape = (3, 9, 7)
    a = np.random.default_rng(3).integers(0, 1000, shape).astype(np.int64)
    forms = layouts(shape, size)
    for sname, slayout in forms.items():
        if quick and sname != "axis0-few-planes":
            continue
        x = DistArray.from_global(a, ghost=1, **slayout)
        for tname, tlayout in forms.items():
            case = f"{sname} -> {tname} at {size} ranks"
            y = DistArray.zeros(shape, np.float32, **tlayout)
            assert redistribute(x, y) is y, case
            check(y.allgather(), a.astype(np.float32), case)
        # a new array: permuted axes (3 planes become the last axis), cropped and padded
        t = redistribute(x, grid=(min(size, 7), 1, 1), axes=(2, 0, 1))
        check(t.allgather(), a.transpose(2, 0, 1), f"{sname} transposed at {size} ranks")
        from parvox.decomposition import BlockGrid

        bigger = BlockGrid.create((2, 12, 7), 2 * size + 1)
        pad = np.zeros((2, 12, 7), np.int64)
        pad[:, :9] = a[:2]
        check(redistribute(x, grid=bigger, assignment="round_robin").allgather(), pad,
              f"{sname} cropped and padded at {size} ranks")


mpi_tests(
    globals(),
    {"collectives_facade": run_facade, "redistribute": run_redistribute},
    ranks=SCALE_RANKS,
    timeout=300,
    marks=[pytest.mark.scale],
)
