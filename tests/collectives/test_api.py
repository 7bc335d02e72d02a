"""The function API under MPI at 1-4 ranks against NumPy references (batched bodies)."""

from __future__ import annotations

import numpy as np

from parvox.testing import mpi_test
from tests.collectives.test_algorithms import AFFINE, affine

DTYPES = (np.float64, np.int32, np.float32)


def _sizes(p: int) -> list[int]:
    return [0, 1, 7, 3 * p + 1, (1 << 17) + 3]  # the last is ~1 MiB of float64


def _contrib(r: int, n: int, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed * 1000 + r)
    return rng.integers(-40, 40, n).astype(dtype)  # small integers: every sum order is exact


def _numpy_reduce(xs: list[np.ndarray], op) -> np.ndarray:
    """The reference: one NumPy reduction over the stacked contributions (rank along axis 0),
    independent of the library's operators. ``affine`` (the composition of affine maps in
    rank order, ``x -> a0 (a1 (... ) + b1) + b0``) in closed form: ``a = prod(a_k)`` and
    ``b = sum_k (a_0 ... a_{k-1}) b_k``."""
    stack = np.stack(xs)
    if op == "sum":
        return np.sum(stack, axis=0)
    if op == "max":
        return np.max(stack, axis=0)
    if op is np.minimum:
        return np.minimum.reduce(stack, axis=0)
    if op is affine:
        a, b = stack["a"], stack["b"]
        before = np.cumprod(np.vstack([np.ones_like(a[:1]), a[:-1]]), axis=0)
        out = np.empty(stack.shape[1:], stack.dtype)
        out["a"] = np.prod(a, axis=0)
        out["b"] = np.sum(before * b, axis=0)
        return out
    raise AssertionError(f"no reference for {op!r}")


def test_numpy_reference_of_affine_is_the_composition():
    maps = np.array([(2, 3), (-1, 5), (4, -2)], AFFINE)  # x -> 2x+3, -x+5, 4x-2
    ref = _numpy_reduce([maps[i : i + 1] for i in range(3)], affine)
    for x in (-3, 0, 7):
        assert ref["a"][0] * x + ref["b"][0] == 2 * (-(4 * x - 2) + 5) + 3


@mpi_test(ranks=(1, 2, 3, 4), timeout=240)
def test_reductions_every_algorithm():
    from mpi4py import MPI

    from parvox import collectives as coll

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    for n in _sizes(p):
        for dtype in DTYPES if n < 1000 else (np.float64,):
            xs = [_contrib(i, n, dtype, n) for i in range(p)]
            for op in ("sum", "max", np.minimum) if n < 1000 else ("sum",):
                ref = _numpy_reduce(xs, op)
                for alg in coll.ALGORITHMS["allreduce"] + ("auto",):
                    out = coll.allreduce(xs[r], op=op, algorithm=alg, segment=4096)
                    np.testing.assert_array_equal(out, ref, err_msg=f"allreduce {alg} n={n}")
                root = (n + 1) % p
                for alg in coll.ALGORITHMS["reduce"] + ("auto",):
                    out = coll.reduce(xs[r], op=op, root=root, algorithm=alg)
                    if r == root:
                        np.testing.assert_array_equal(out, ref, err_msg=f"reduce {alg} n={n}")
                    else:
                        assert out is None
                counts = [(n * (i + 1)) // p - (n * i) // p for i in range(p)]
                d = np.concatenate([[0], np.cumsum(counts)])
                for alg in coll.ALGORITHMS["reduce_scatter"] + ("auto",):
                    out = coll.reduce_scatter(xs[r], counts, op=op, algorithm=alg)
                    np.testing.assert_array_equal(out, ref[d[r] : d[r + 1]], err_msg=alg)
                if n % p == 0:
                    out = coll.reduce_scatter_block(xs[r].reshape(p, -1), op=op)
                    np.testing.assert_array_equal(out.ravel(), ref[d[r] : d[r + 1]])


def _affine_data(p: int, n: int):
    rng = np.random.default_rng(n)
    xs = []
    for _ in range(p):
        a = np.empty(n, AFFINE)
        a["a"] = rng.integers(-3, 4, n)
        a["b"] = rng.integers(-5, 6, n)
        xs.append(a)
    return xs


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_noncommutative_rank_order():
    from mpi4py import MPI

    from parvox import collectives as coll

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    for n in (1, 5, 3 * p + 1):
        xs = _affine_data(p, n)
        ref = _numpy_reduce(xs, affine)
        for alg in ("auto", "linear", "binomial", "recursive_doubling", "native"):
            out = coll.allreduce(xs[r], op=affine, algorithm=alg)
            assert (out == ref).all(), alg
        for root in range(p):
            for alg in ("auto", "linear", "binomial"):
                out = coll.reduce(xs[r], op=affine, root=root, algorithm=alg)
                if r == root:
                    assert (out == ref).all(), (alg, root)
        counts = [n // p + (i < n % p) for i in range(p)]
        d = np.concatenate([[0], np.cumsum(counts)])
        for alg in ("auto", "linear", "binomial"):
            out = coll.reduce_scatter(xs[r], counts, op=affine, algorithm=alg)
            assert (out == ref[d[r] : d[r + 1]]).all(), alg
        if p > 1:
            for alg in ("ring", "rabenseifner"):
                try:
                    coll.allreduce(xs[r], op=affine, algorithm=alg)
                except ValueError as exc:
                    assert "commutative" in str(exc)
                else:
                    raise AssertionError(f"{alg} accepted a non-commutative operator")


@mpi_test(ranks=(1, 2, 3, 4), timeout=240)
def test_data_movement_every_algorithm():
    from mpi4py import MPI

    from parvox import collectives as coll

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    for n in _sizes(p):
        for dtype in DTYPES if n < 1000 else (np.float64,):
            full = np.stack([_contrib(i, n, dtype, 7) for i in range(p)])  # (p, n)
            root = n % p
            for alg in coll.ALGORITHMS["bcast"] + ("auto",):
                buf = full[root].copy() if r == root else np.zeros(n, dtype)
                coll.bcast(buf, root=root, algorithm=alg)
                np.testing.assert_array_equal(buf, full[root], err_msg=f"bcast {alg}")
            for alg in coll.ALGORITHMS["allgather"] + ("auto",):
                out = coll.allgather(full[r], algorithm=alg)
                np.testing.assert_array_equal(out, full, err_msg=f"allgather {alg}")
            for alg in coll.ALGORITHMS["gather"] + ("auto",):
                out = coll.gather(full[r], root=root, algorithm=alg)
                if r == root:
                    np.testing.assert_array_equal(out, full, err_msg=f"gather {alg}")
            for alg in coll.ALGORITHMS["scatter"] + ("auto",):
                out = coll.scatter(full if r == root else None, np.zeros(n, dtype), root=root,
                                   algorithm=alg)
                np.testing.assert_array_equal(out, full[r], err_msg=f"scatter {alg}")
            # all-to-all: block j of rank i's send is value (i, j)
            m = max(1, n // p) if n < 1000 else n // p
            send = (np.arange(p * m).reshape(p, m) + 1000 * r).astype(dtype)
            ref = np.stack([(np.arange(p * m).reshape(p, m)[r] + 1000 * i) for i in range(p)])
            for alg in coll.ALGORITHMS["alltoall"] + ("auto",):
                out = coll.alltoall(send, algorithm=alg)
                np.testing.assert_array_equal(out, ref.astype(dtype), err_msg=f"alltoall {alg}")
    # v-variants with uneven (and empty) blocks
    rng = np.random.default_rng(11)
    counts = rng.integers(0, 5, p).tolist()
    d = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    full = np.arange(d[-1], dtype=np.float64)
    mine = full[d[r] : d[r + 1]]
    for alg in coll.ALGORITHMS["allgather"]:
        np.testing.assert_array_equal(coll.allgatherv(mine, counts, algorithm=alg), full)
    for alg in coll.ALGORITHMS["gather"]:
        out = coll.gatherv(mine, counts, root=p - 1, algorithm=alg)
        if r == p - 1:
            np.testing.assert_array_equal(out, full)
    for alg in coll.ALGORITHMS["scatter"]:
        out = coll.scatterv(full if r == 0 else None, counts, np.zeros(counts[r]), algorithm=alg)
        np.testing.assert_array_equal(out, mine)
    c = rng.integers(0, 4, (p, p))  # c[i, j] elements from i to j
    send = np.arange(c[r].sum(), dtype=np.float64) + 100 * r
    ref = np.concatenate([
        (np.arange(c[i].sum()) + 100 * i)[c[i, :r].sum() : c[i, : r + 1].sum()] for i in range(p)
    ])
    for alg in coll.ALGORITHMS["alltoallv"]:
        out = coll.alltoallv(send, c[r].tolist(), np.zeros(c[:, r].sum()), c[:, r].tolist(),
                             algorithm=alg)
        np.testing.assert_array_equal(out, ref, err_msg=f"alltoallv {alg}")
    for alg in coll.ALGORITHMS["barrier"]:
        coll.barrier(algorithm=alg)


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_in_place():
    from mpi4py import MPI

    from parvox import collectives as coll

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    n = 3 * p + 2
    xs = [_contrib(i, n, np.float64, 3) for i in range(p)]
    for alg in coll.ALGORITHMS["allreduce"]:
        buf = xs[r].copy()
        coll.allreduce(MPI.IN_PLACE, buf, algorithm=alg)
        np.testing.assert_array_equal(buf, sum(xs))
        buf = xs[r].copy()
        coll.allreduce(buf, buf, algorithm=alg)
        np.testing.assert_array_equal(buf, sum(xs))
    for alg in coll.ALGORITHMS["reduce"]:
        buf = xs[r].copy()
        if r == 0:
            coll.reduce(MPI.IN_PLACE, buf, root=0, algorithm=alg)
            np.testing.assert_array_equal(buf, sum(xs))
        else:
            coll.reduce(buf, root=0, algorithm=alg)
    full = np.stack(xs)
    for alg in coll.ALGORITHMS["allgather"]:
        buf = np.zeros((p, n))
        buf[r] = xs[r]
        coll.allgather(MPI.IN_PLACE, buf, algorithm=alg)
        np.testing.assert_array_equal(buf, full, err_msg=alg)
    for alg in coll.ALGORITHMS["gather"]:
        if r == 0:
            buf = np.zeros((p, n))
            buf[0] = xs[0]
            coll.gather(MPI.IN_PLACE, buf, root=0, algorithm=alg)
            np.testing.assert_array_equal(buf, full, err_msg=alg)
        else:
            coll.gather(xs[r], root=0, algorithm=alg)
    for alg in coll.ALGORITHMS["alltoall"]:
        buf = full.copy()[:, : (n // p) * p].reshape(-1)[: p * (n // p)].copy()
        ref = np.stack([full[i].reshape(-1)[: p * (n // p)].reshape(p, -1)[r] for i in range(p)])
        buf = full[r][: p * (n // p)].reshape(p, -1).copy()
        coll.alltoall(MPI.IN_PLACE, buf, algorithm=alg)
        np.testing.assert_array_equal(buf, ref, err_msg=alg)
    sb = np.stack(xs)[:, : p * 2].copy()
    for alg in coll.ALGORITHMS["reduce_scatter"]:
        buf = sb[r].copy()
        out = coll.reduce_scatter_block(MPI.IN_PLACE, buf, algorithm=alg)
        # as in MPI: the result is the first block of recvbuf, the rest is left as it was
        assert out is buf
        np.testing.assert_array_equal(buf[:2], sb.sum(axis=0)[2 * r : 2 * r + 2], err_msg=alg)
        np.testing.assert_array_equal(buf[2:], sb[r][2:], err_msg=alg)
    ys = _affine_data(p, 5)
    for alg in coll.ALGORITHMS["scan"]:  # associative, not commutative: rank order counts
        for kind, upto in (("scan", r + 1), ("exscan", r)):
            buf = ys[r].copy()
            getattr(coll, kind)(MPI.IN_PLACE, buf, op=affine, algorithm=alg)
            if upto:
                assert (buf == _numpy_reduce(ys[:upto], affine)).all(), (kind, alg)


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_many_outstanding_complete_in_random_order():
    import random

    from mpi4py import MPI

    from parvox import collectives as coll

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    n = 5 * p + 3
    xs = [_contrib(i, n, np.float64, 5) for i in range(p)]
    full = np.stack(xs)
    modes = ["test", "none"]
    if MPI.Query_thread() == MPI.THREAD_MULTIPLE:
        modes.append("thread")
    for mode in modes:
        for trial in range(3):
            reqs, checks = [], []
            for alg in ("ring", "recursive_doubling", "rabenseifner", "binomial", "native"):
                reqs.append(coll.iallreduce(xs[r], algorithm=alg, progress=mode, segment=64))
                checks.append(sum(xs))
            for alg in ("bruck", "ring", "native"):
                reqs.append(coll.iallgather(xs[r], algorithm=alg, progress=mode))
                checks.append(full)
            buf = full[1 % p].copy() if r == 1 % p else np.zeros(n)
            reqs.append(coll.ibcast(buf, root=1 % p, algorithm="binomial", progress=mode))
            checks.append(full[1 % p])
            reqs.append(coll.ibarrier(progress=mode))
            checks.append(None)
            # every rank waits in its own random order: progress must not depend on it
            order = list(range(len(reqs)))
            random.Random(r * 97 + trial).shuffle(order)
            if trial == 1 and mode != "none":  # "none" never progresses in test()
                while not coll.testall(reqs):
                    idx, flag = coll.testany(reqs)
                    assert flag is False or idx is not None
                    coll.waitany(reqs)
            for i in order:
                got = reqs[i].wait()
                if checks[i] is not None:
                    np.testing.assert_array_equal(got, checks[i], err_msg=f"{mode} {i}")
            assert all(q.test() for q in reqs)
            assert coll.waitall(reqs)[0] is reqs[0].result


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_overlap_helper_and_progress_thread():
    from mpi4py import MPI

    from parvox import collectives as coll

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    n = 100_003
    x = np.full(n, float(r + 1))
    modes = ["test", "none"] + (["thread"] if MPI.Query_thread() == MPI.THREAD_MULTIPLE else [])
    for mode in modes:
        req = coll.iallreduce(x, algorithm="ring", progress=mode, segment=1 << 14)
        done = coll.overlap(req, lambda i: float(np.sum(np.sqrt(np.arange(2000.0) + i))),
                            range(40), tests=4 * p)
        assert len(done) == 40
        np.testing.assert_array_equal(req.wait(), np.full(n, p * (p + 1) / 2))
    ctx = coll.configure(progress="test")
    assert ctx.progress == "test"


@mpi_test(ranks=(2, 3, 4), timeout=120)
def test_mismatched_counts_raise_not_hang():
    from mpi4py import MPI

    from parvox import collectives as coll

    world = MPI.COMM_WORLD
    r = world.Get_rank()
    comm = world.Dup()  # leftovers of the failed collectives stay on private communicators
    coll.configure(comm, check=True)
    n = 10 if r == 0 else 12
    for call in (
        lambda: coll.allreduce(np.ones(n), comm=comm, algorithm="ring"),
        lambda: coll.allgather(np.ones(n), comm=comm),
        lambda: coll.bcast(np.ones(n), root=0, comm=comm),
        lambda: coll.reduce(np.ones(3), root=r, comm=comm),  # roots disagree
    ):
        try:
            call()
        except coll.CollectiveError as exc:
            assert "disagree" in str(exc)
        else:
            raise AssertionError("mismatch not detected with check=True")
    # without the check: an MPI truncation error or a timeout, never a silent hang
    failures = 0
    for alg in ("ring", "recursive_doubling", "linear", "binomial"):
        c2 = world.Dup()
        try:
            coll.allreduce(np.ones(n), comm=c2, algorithm=alg, timeout=2.0)
        except coll.CollectiveError:
            failures += 1
    # a rank that never joins: the others time out with a clear error
    c3 = world.Dup()
    coll.configure(c3)  # the private duplicate is made collectively, before rank 0 drops out
    if r != 0:
        try:
            coll.barrier(comm=c3, algorithm="dissemination", timeout=1.0)
        except coll.CollectiveTimeout as exc:
            assert "not complete" in str(exc)
            failures += 1
        else:
            raise AssertionError("barrier without rank 0 completed")
    total = world.allreduce(failures)
    assert total >= 4 + (world.Get_size() - 1)


@mpi_test(ranks=(1, 2, 3, 4), timeout=60)
def test_bad_arguments_name_the_argument():
    import pytest

    from parvox import collectives as coll

    with pytest.raises(ValueError, match="algorithm"):
        coll.allreduce(np.ones(3), algorithm="bogus")
    with pytest.raises(ValueError, match="op"):
        coll.allreduce(np.ones(3), op="bogus")
    with pytest.raises(ValueError, match="root"):
        coll.bcast(np.ones(3), root=99)
    with pytest.raises(ValueError, match="progress"):
        coll.iallreduce(np.ones(3), progress="sometimes")
    with pytest.raises(TypeError, match="recvbuf"):
        coll.allreduce(np.ones(3), np.ones(3, np.int32))


@mpi_test(ranks=(2, 3, 4), timeout=120)
def test_blocking_collective_progresses_outstanding_ones():
    from mpi4py import MPI

    from parvox import collectives as coll

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    x = np.full(4 * p + 1, float(r))
    for blocking_alg in ("recursive_doubling", "native"):
        # legal MPI: both collectives are started in the same order on every rank, but rank 0
        # enters the blocking one before waiting for the first, the others wait first
        a = coll.iallreduce(x, algorithm="ring", progress="test", segment=8)
        if r == 0:
            b = coll.allreduce(x, algorithm=blocking_alg)
            got = a.wait()
        else:
            got = a.wait()
            b = coll.allreduce(x, algorithm=blocking_alg)
        np.testing.assert_array_equal(got, np.full_like(x, p * (p - 1) / 2))
        np.testing.assert_array_equal(b, np.full_like(x, p * (p - 1) / 2))
