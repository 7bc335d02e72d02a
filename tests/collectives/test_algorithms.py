"""Every schedule builder at P = 1..9 in the in-process simulator, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.collectives import alg_alltoall as a2a
from parvox.collectives import alg_gather as ag
from parvox.collectives import alg_reduce as ar
from parvox.collectives import alg_scan as asc
from parvox.collectives.ops import Op, parse_op

from ._sim import simulate

SIZES = range(1, 10)
AFFINE = np.dtype([("a", "<i8"), ("b", "<i8")])


def serial_reduce(arrays, op):
    """The reference: NumPy's own ufunc (or the Python function) folded left to right, not
    the library's operator machinery (``f(f(x0, x1), x2)``)."""
    import functools

    fn = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}.get(op, op)
    return functools.reduce(fn, [np.asarray(a) for a in arrays])


def affine(x, y):
    """Composition of affine maps: associative, not commutative."""
    out = np.empty_like(x)
    out["a"] = x["a"] * y["a"]
    out["b"] = x["a"] * y["b"] + x["b"]
    return out


def _data(p: int, n: int, seed: int, dtype=np.int64) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if dtype == AFFINE:
        out = []
        for _ in range(p):
            a = np.empty(n, AFFINE)
            a["a"] = rng.integers(-3, 4, n)
            a["b"] = rng.integers(-5, 6, n)
            out.append(a)
        return out
    return [rng.integers(-50, 50, n).astype(dtype) for _ in range(p)]


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("n", [0, 1, 7, 23])
@pytest.mark.parametrize(
    "alg", ["linear", "binomial", "recursive_doubling", "ring", "rabenseifner"]
)
def test_allreduce(p, n, alg):
    xs = _data(p, n, p * 100 + n)
    out = [np.zeros(n, np.int64) for _ in range(p)]
    build = getattr(ar, f"allreduce_{alg}")
    kw = {"segment": 16} if alg == "ring" else {}
    simulate([build(xs[r], out[r], parse_op("sum"), r, p, **kw) for r in range(p)])
    for r in range(p):
        np.testing.assert_array_equal(out[r], sum(xs))


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("alg", ["linear", "binomial", "recursive_doubling"])
def test_allreduce_noncommutative_in_place(p, alg):
    xs = _data(p, 5, p, AFFINE)
    bufs = [x.copy() for x in xs]
    op = parse_op(affine)
    build = getattr(ar, f"allreduce_{alg}")
    simulate([build(bufs[r], bufs[r], op, r, p) for r in range(p)])
    ref = serial_reduce(xs, affine)
    for r in range(p):
        assert (bufs[r] == ref).all()


@pytest.mark.parametrize("alg", ["linear", "binomial", "recursive_doubling", "ring",
                                 "rabenseifner"])
def test_one_rank_in_place_allreduce_touches_nothing(alg):
    # alone, in place is already the result: no copy of a (large) image per call
    buf = np.arange(7, dtype=np.int64)
    s = getattr(ar, f"allreduce_{alg}")(buf, buf, parse_op("sum"), 0, 1)
    assert [act for rnd in s.rounds for act in rnd] == []
    simulate([s])
    np.testing.assert_array_equal(buf, np.arange(7))


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("alg", ["linear", "binomial", "rabenseifner"])
def test_reduce_every_root(p, alg):
    for root in range(p):
        xs = _data(p, 11, root)
        out = np.zeros(11, np.int64)
        build = getattr(ar, f"reduce_{alg}")
        simulate([build(xs[r], out if r == root else None, parse_op("sum"), root, r, p)
                  for r in range(p)])
        np.testing.assert_array_equal(out, sum(xs))


@pytest.mark.parametrize("p", SIZES)
def test_reduce_binomial_noncommutative(p):
    for root in range(p):
        xs = _data(p, 3, root, AFFINE)
        out = np.zeros(3, AFFINE)
        simulate([ar.reduce_binomial(xs[r], out if r == root else None, parse_op(affine), root,
                                     r, p) for r in range(p)])
        assert (out == serial_reduce(xs, affine)).all()


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("alg", ["linear", "binomial", "ring", "rabenseifner"])
def test_reduce_scatter(p, alg):
    rng = np.random.default_rng(p)
    counts = [int(c) for c in rng.integers(0, 5, p)]
    n = sum(counts)
    xs = _data(p, n, 3)
    d = ag.displacements(counts)
    out = [np.zeros(counts[r], np.int64) for r in range(p)]
    build = getattr(ar, f"reduce_scatter_{alg}")
    kw = {"segment": 8} if alg == "ring" else {}
    simulate([build(xs[r], out[r], counts, parse_op("sum"), r, p, **kw) for r in range(p)])
    total = sum(xs)
    for r in range(p):
        np.testing.assert_array_equal(out[r], total[d[r] : d[r + 1]])


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("alg", ["linear", "binomial", "ring"])
def test_bcast(p, alg):
    for root in range(p):
        bufs = [np.arange(13) * (r == root) for r in range(p)]
        build = getattr(ag, f"bcast_{alg}")
        kw = {"segment": 24} if alg == "ring" else {}
        simulate([build(bufs[r], root, r, p, **kw) for r in range(p)])
        for b in bufs:
            np.testing.assert_array_equal(b, np.arange(13))


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("alg", ["linear", "binomial"])
def test_gatherv_scatterv(p, alg):
    rng = np.random.default_rng(p)
    counts = [int(c) for c in rng.integers(0, 4, p)]
    d = ag.displacements(counts)
    full = np.arange(d[-1]) + 100
    for root in range(p):
        out = np.zeros(d[-1], np.int64)
        g = getattr(ag, f"gatherv_{alg}")
        simulate([g(full[d[r] : d[r + 1]].copy(), out if r == root else None, counts, root, r, p,
                    *([np.int64] if alg == "binomial" else [])) for r in range(p)])
        np.testing.assert_array_equal(out, full)
        parts = [np.zeros(counts[r], np.int64) for r in range(p)]
        sc = getattr(ag, f"scatterv_{alg}")
        simulate([sc(full if r == root else None, parts[r], counts, root, r, p,
                     *([np.int64] if alg == "binomial" else [])) for r in range(p)])
        for r in range(p):
            np.testing.assert_array_equal(parts[r], full[d[r] : d[r + 1]])


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("alg", ["linear", "binomial", "ring", "recursive_doubling", "bruck"])
@pytest.mark.parametrize("in_place", [False, True])
def test_allgatherv(p, alg, in_place):
    rng = np.random.default_rng(p)
    counts = [int(c) for c in rng.integers(0, 4, p)]
    d = ag.displacements(counts)
    full = np.arange(d[-1]) * 3
    outs = [np.zeros(d[-1], np.int64) for _ in range(p)]
    if in_place:
        for r in range(p):
            outs[r][d[r] : d[r + 1]] = full[d[r] : d[r + 1]]
    build = getattr(ag, f"allgatherv_{alg}")
    simulate([build(None if in_place else full[d[r] : d[r + 1]].copy(), outs[r], counts, r, p)
              for r in range(p)])
    for o in outs:
        np.testing.assert_array_equal(o, full)


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("alg", ["linear", "pairwise"])
def test_alltoallv(p, alg):
    rng = np.random.default_rng(p)
    c = rng.integers(0, 4, (p, p))  # c[i, j]: i sends to j
    sends = [np.arange(c[i].sum()) + 1000 * i for i in range(p)]
    recvs = [np.zeros(c[:, j].sum(), np.int64) for j in range(p)]
    build = getattr(a2a, f"alltoallv_{alg}")
    simulate([build(sends[r], c[r].tolist(), recvs[r], c[:, r].tolist(), r, p)
              for r in range(p)])
    for j in range(p):
        ref = np.concatenate(
            [sends[i][ag.displacements(c[i])[j] : ag.displacements(c[i])[j + 1]] for i in range(p)]
        )
        np.testing.assert_array_equal(recvs[j], ref)


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("count", [0, 1, 3])
def test_alltoall_bruck(p, count):
    sends = [np.arange(p * count) + 100 * r for r in range(p)]
    recvs = [np.zeros(p * count, np.int64) for _ in range(p)]
    simulate([a2a.alltoall_bruck(sends[r], recvs[r], count, r, p) for r in range(p)])
    for j in range(p):
        ref = np.concatenate([sends[i][j * count : (j + 1) * count] for i in range(p)])
        np.testing.assert_array_equal(recvs[j], ref)


def _knowledge(schedules) -> list[set[int]]:
    """Run ``schedules`` (FIFO per pair, like ``simulate``) tracking causality: every message
    carries the set of ranks its sender had heard of (itself included) when it posted the
    send; a receive adds that set to the receiver's. Returns what each rank knew at its end."""
    from collections import deque

    from parvox.collectives.schedule import RECV, SEND

    p = len(schedules)
    know = [{r} for r in range(p)]
    chan: dict[tuple[int, int], deque] = {}
    rnd = [-1] * p
    waiting: list[list[int]] = [[] for _ in range(p)]

    def post(r: int) -> None:
        rnd[r] += 1
        for kind, _, peer in schedules[r].rounds[rnd[r]]:
            if kind == SEND:
                chan.setdefault((r, peer), deque()).append(frozenset(know[r]))
            elif kind == RECV:
                waiting[r].append(peer)

    def more(r: int) -> bool:
        return rnd[r] + 1 < len(schedules[r].rounds)

    for r in range(p):
        post(r)
    moved = True
    while moved:
        moved = False
        for r in range(p):
            still = []
            for peer in waiting[r]:
                q = chan.get((peer, r))
                if q:
                    know[r] |= q.popleft()
                    moved = True
                else:
                    still.append(peer)
            waiting[r] = still
            while not waiting[r] and more(r):
                post(r)
                moved = True
    assert not any(waiting) and not any(more(r) for r in range(p)), "stalled"
    return know


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("alg", ["linear", "dissemination"])
def test_barrier(p, alg):
    schedules = [getattr(a2a, f"barrier_{alg}")(r, p) for r in range(p)]
    simulate(schedules)
    # what makes it a barrier: no rank leaves before it has heard (transitively) of every
    # rank's arrival
    assert all(k == set(range(p)) for k in _knowledge(schedules))


def test_the_barrier_check_tells_a_gather_from_a_barrier():
    from parvox.collectives.schedule import Schedule

    p = 4
    gather = []
    for r in range(p):  # the first half of barrier_linear alone: rank 0 hears everyone
        s = Schedule("gather")
        for i in range(1, p) if r == 0 else ():
            s.recv(np.zeros(0, np.uint8), i)
        if r:
            s.send(np.zeros(0, np.uint8), 0)
        gather.append(s)
    know = _knowledge(gather)
    assert know[0] == set(range(p)) and know[1] == {1}


def test_ring_rejects_noncommutative():
    with pytest.raises(ValueError, match="commutative"):
        ar.allreduce_ring(np.zeros(3), np.zeros(3), parse_op(Op(np.subtract)), 0, 2)


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("alg", ["linear", "recursive_doubling"])
@pytest.mark.parametrize("in_place", [False, True])
def test_scan_and_exscan_keep_rank_order(p, alg, in_place):
    xs = _data(p, 4, p, AFFINE)
    op = parse_op(affine)
    for kind in ("scan", "exscan"):
        outs = [x.copy() if in_place else np.zeros(4, AFFINE) for x in xs]
        before = [o.copy() for o in outs]
        build = getattr(asc, f"{kind}_{alg}")
        simulate([build(outs[r] if in_place else xs[r], outs[r], op, r, p) for r in range(p)])
        for r in range(p):
            upto = r + 1 if kind == "scan" else r
            if upto == 0:  # exscan: rank 0's buffer is left as it was
                assert (outs[0] == before[0]).all()
            else:
                assert (outs[r] == serial_reduce(xs[:upto], affine)).all(), (kind, r)


@pytest.mark.parametrize("p", SIZES)
def test_rooted_counts_gatherv_scatterv(p):
    """gatherv/scatterv the MPI way: only root knows the counts; the schedule fetches them."""
    rng = np.random.default_rng(p + 50)
    counts = [int(c) for c in rng.integers(0, 4, p)]
    d = ag.displacements(counts)
    full = np.arange(d[-1]) + 7
    for root in range(p):
        out = np.zeros(d[-1], np.int64)

        def gather(r, out=out, root=root):
            return ag.rooted_counts(
                counts if r == root else None, root, r, p,
                lambda c, r=r: ag.gatherv_binomial(full[d[r] : d[r + 1]].copy(),
                                                   out if r == root else None, c, root, r, p,
                                                   np.int64), "gatherv/binomial")

        simulate([gather(r) for r in range(p)])
        np.testing.assert_array_equal(out, full)
        parts = [np.zeros(counts[r], np.int64) for r in range(p)]

        def scatter(r, root=root, parts=parts):
            return ag.rooted_counts(
                counts if r == root else None, root, r, p,
                lambda c, r=r: ag.scatterv_binomial(full if r == root else None, parts[r], c,
                                                    root, r, p, np.int64), "scatterv/binomial")

        simulate([scatter(r) for r in range(p)])
        for r in range(p):
            np.testing.assert_array_equal(parts[r], full[d[r] : d[r + 1]])
