"""The node-aware (two-level) schedules: in the simulator at P = 1..9 against NumPy, and on MPI at
1-4 ranks against MPI's own Allgatherv / Allreduce, for node sizes that do and do not divide P."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.collectives import alg_gather as ag
from parvox.collectives import alg_nodes as an
from parvox.collectives.ops import parse_op
from parvox.errors import ParameterError
from parvox.testing import mpi_test

from ._sim import simulate
from .test_algorithms import AFFINE, _data, affine, serial_reduce

SIZES = range(1, 10)


def _layouts(p: int) -> list[tuple[tuple[int, ...], ...]]:
    """Consecutive nodes of 1..5 ranks, and nodes of interleaved ranks (0, 2, 4, ...)."""
    out = [an.node_groups(p, k) for k in (1, 2, 3, 4, 5)]
    out.append(tuple(g for g in (tuple(range(0, p, 2)), tuple(range(1, p, 2))) if g))
    return out


def test_node_groups_cut_consecutive_ranks_and_check_their_argument():
    assert an.node_groups(7, 3) == ((0, 1, 2), (3, 4, 5), (6,))
    assert an.node_groups(2, 4) == ((0, 1),)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ParameterError) as info:
            an.node_groups(4, bad)
        assert info.value.param == "ranks_per_node"
    with pytest.raises(ParameterError) as info:
        an.check_nodes([[0, 1], [1, 2]], 3)
    assert info.value.param == "nodes"


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("tree", [False, True])
@pytest.mark.parametrize("in_place", [False, True])
def test_allgatherv(p, tree, in_place):
    rng = np.random.default_rng(p)
    counts = [int(c) for c in rng.integers(0, 4, p)]
    d = ag.displacements(counts)
    full = np.arange(d[-1]) * 3 + 1
    build = an.allgatherv_hierarchical_tree if tree else an.allgatherv_hierarchical
    for nodes in _layouts(p):
        outs = [np.zeros(d[-1], np.int64) for _ in range(p)]
        if in_place:
            for r in range(p):
                outs[r][d[r] : d[r + 1]] = full[d[r] : d[r + 1]]
        simulate([build(None if in_place else full[d[r] : d[r + 1]].copy(), outs[r], counts,
                        r, p, nodes) for r in range(p)])
        for o in outs:
            np.testing.assert_array_equal(o, full, err_msg=str(nodes))


def test_between_node_messages_are_one_per_leader_pair_and_round():
    """8 ranks in 4 nodes of 2: S3 sends 2 x 2 messages between leaders (recursive doubling
    over 4 leaders), S2 3 up and 3 down; a one-level all-gather knows no nodes."""
    p, nodes = 8, an.node_groups(8, 2)
    for build, between in ((an.allgatherv_hierarchical, 8), (an.allgatherv_hierarchical_tree, 6)):
        scheds = [build(np.ones(1), np.zeros(p), [1] * p, r, p, nodes) for r in range(p)]
        sends = [(r, peer) for r, s in enumerate(scheds) for rnd in s.rounds
                 for kind, _, peer in rnd if kind == 0]
        assert sum(a // 2 != b // 2 for a, b in sends) == between


@pytest.mark.parametrize("p", SIZES)
def test_allreduce(p):
    xs = _data(p, 7, p)
    for nodes in _layouts(p):
        out = [np.zeros(7, np.int64) for _ in range(p)]
        simulate([an.allreduce_hierarchical(xs[r], out[r], parse_op("sum"), r, p, nodes)
                  for r in range(p)])
        for o in out:
            np.testing.assert_array_equal(o, sum(xs))


@pytest.mark.parametrize("p", SIZES)
def test_allreduce_noncommutative_in_place_keeps_rank_order(p):
    xs = _data(p, 5, p, AFFINE)
    op = parse_op(affine)
    for k in (1, 2, 3):
        bufs = [x.copy() for x in xs]
        simulate([an.allreduce_hierarchical(bufs[r], bufs[r], op, r, p, an.node_groups(p, k))
                  for r in range(p)])
        ref = serial_reduce(xs, affine)
        for r in range(p):
            assert (bufs[r] == ref).all()
    if p > 2:
        with pytest.raises(ParameterError) as info:
            an.allreduce_hierarchical(xs[0], xs[0].copy(), op, 0, p, _layouts(p)[-1])
        assert info.value.param == "algorithm"


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_node_aware_collectives_equal_mpi():
    from mpi4py import MPI

    from parvox import collectives as coll

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    counts = [(3 * i + 2) % 5 for i in range(p)]  # one empty block at P >= 4
    d = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    mine = (np.arange(counts[r]) + 10.0 * r).astype(np.float64)
    ref = np.empty(d[-1])
    comm.Allgatherv(mine, [ref, counts])
    x = np.arange(6, dtype=np.int64) * (r + 1) - r
    ref_sum, ref_max = np.empty_like(x), np.empty_like(x)
    comm.Allreduce(x, ref_sum, op=MPI.SUM)
    comm.Allreduce(x, ref_max, op=MPI.MAX)
    try:
        for rpn in (1, 2, 3, 4, 5, "shared"):
            ctx = coll.configure(ranks_per_node=rpn)
            nodes = ctx.nodes()
            assert sorted(q for g in nodes for q in g) == list(range(p))
            if rpn != "shared":
                assert nodes == an.node_groups(p, rpn)
            for alg in ("hierarchical", "hierarchical_tree"):
                out = coll.allgatherv(mine, counts, algorithm=alg)
                np.testing.assert_array_equal(out, ref, err_msg=f"{alg} rpn={rpn}")
                buf = np.zeros(d[-1])
                buf[d[r] : d[r + 1]] = mine
                coll.iallgatherv(MPI.IN_PLACE, counts, buf, algorithm=alg).wait()
                np.testing.assert_array_equal(buf, ref, err_msg=f"i{alg} in place rpn={rpn}")
            np.testing.assert_array_equal(coll.allreduce(x, algorithm="hierarchical"), ref_sum)
            np.testing.assert_array_equal(
                coll.iallreduce(x, op="max", algorithm="hierarchical").wait(), ref_max)
        with pytest.raises(ParameterError) as info:
            coll.configure(ranks_per_node=0)
        assert info.value.param == "ranks_per_node"
    finally:
        coll.configure(ranks_per_node="shared")
