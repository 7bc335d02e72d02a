"""Blocks at 5, 8, 13 and 16 ranks: merge and swap reductions equal the serial fold,
neighbourhood exchange ends with the serial walk's outcome, compositing equals the serial
front-to-back fold, particle tracing equals the serial trace -- with fewer blocks than ranks
(ranks without blocks), more blocks than ranks, contiguous and round-robin."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import mpi_tests
from tests.blocks.test_exchange import _model, _route, _seeds
from tests.blocks.test_reduce import _matmul_mod, _matrices, _serial
from tests.scale._layouts import SCALE_RANKS


def _block_counts(size: int, quick: bool = False) -> list[tuple[int, str]]:
    """Fewer blocks than ranks, one per rank, more (an odd count) dealt round-robin
    (``quick``: fewer, and more dealt round-robin)."""
    if quick:
        return [(max(size - 3, 1), "contiguous"), (2 * size + 1, "round_robin")]
    return [(max(size - 3, 1), "contiguous"), (size, "contiguous"),
            (2 * size + 1, "round_robin")]


def run_merge_swap(quick: bool = False) -> None:
    from mpi4py import MPI

    from parvox.blocks import (
        Master,
        RegularMergePartners,
        RegularSwapPartners,
        merge_reduce,
        swap_reduce,
    )

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    for n, assign in _block_counts(size, quick):
        m = Master(n, assign)
        expect = _serial(n)
        items = {g: _matrices(g) for g in m.gids}
        for k in (3,) if quick else (2, 3, 8):
            case = f"{n} blocks {assign} k={k} at {size} ranks"
            out = merge_reduce(m, RegularMergePartners(n, k), _matmul_mod, items)
            if m.is_local(0):
                np.testing.assert_array_equal(out[0], expect, err_msg=case)
            else:
                assert out == {}, case
            pieces = swap_reduce(m, RegularSwapPartners(n, k), _matmul_mod, items)
            cover = np.zeros(len(expect), int)
            for lo, hi, data in pieces.values():
                np.testing.assert_array_equal(data, expect[lo:hi], err_msg=case)
                cover[lo:hi] += 1
            assert comm.allreduce(cover).tolist() == [1] * len(expect), case


def run_exchange(quick: bool = False) -> None:
    from mpi4py import MPI

    from parvox.blocks import Master, RegularDecomposer, iexchange

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    cases = [
        ((3, 17), max(size - 3, 1), False, "full"),  # fewer blocks than ranks
        ((2 * size + 3,), 2 * size + 1, False, "face"),  # a chain of mostly 1-element blocks
        ((4, 5, size + 2), 2 * size, True, "face"),  # periodic 3-D, more blocks than ranks
    ]
    for seed, (shape, nblocks, wrap, conn) in enumerate(cases[1:] if quick else cases):
        dec = RegularDecomposer(shape, nblocks, wrap=wrap, connectivity=conn)
        seeds = _seeds(dec.nblocks, seed)
        expect = _model(dec, seeds)
        for arrivals, assign in ((1, "contiguous"), (3, "round_robin")):
            m = Master(dec.nblocks, assign)
            dec.decompose(m, lambda gid, core, bounds, s=seeds: {"done": [], "new": list(s[gid])})

            def work(block, cp):
                todo = block["new"] + [(n, h) for n, h, _pay in cp.incoming()]
                block["new"] = []
                for name, hops in todo:
                    if hops == 0:
                        block["done"].append((name, cp.gid, 0))
                        continue
                    for target, n, h in _route(name, hops, cp.gid, cp.link.gids):
                        cp.enqueue(target, (n, h, np.arange(h, dtype=np.int32)))

            stats = iexchange(m, work, arrivals=arrivals)
            got = comm.allgather([t for _, b in m for t in b["done"]])
            case = f"{shape} {dec.nblocks} blocks {assign} at {size} ranks"
            assert sorted(t for part in got for t in part) == expect, case
            assert comm.allreduce(stats.messages_sent) == comm.allreduce(
                stats.messages_received), case


def run_compositing(quick: bool = False) -> None:
    from mpi4py import MPI

    from parvox.blocks import Master
    from parvox.compositing import composite, composite_serial, premultiply

    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    for n, assign in _block_counts(size, quick):
        rng = np.random.default_rng(n)
        stack = premultiply(rng.random((n, 7, 5, 4), dtype=np.float32))  # 35 pixels
        ref = composite_serial(stack)
        m = Master(n, assign)
        images = {g: stack[g] for g in m.gids}
        for k in (8,) if quick else (2, 8):
            case = f"{n} images {assign} k={k} at {size} ranks"
            img = composite(m, images, k=k, gather=size - 1)
            if rank == size - 1:
                np.testing.assert_allclose(img, ref, rtol=1e-5, atol=1e-6, err_msg=case)
            else:
                assert img is None, case
        pieces = composite(m, images, k=3, gather=None)
        flat = ref.reshape(-1, 4)
        cover = np.zeros(len(flat), int)
        for start, stop, pixels in pieces.values():
            np.testing.assert_allclose(pixels, flat[start:stop], rtol=1e-5, atol=1e-6)
            cover[start:stop] += 1
        assert comm.allreduce(cover).tolist() == [1] * len(flat), f"{n} images {assign}"


def run_particles(quick: bool = False) -> None:
    from mpi4py import MPI

    from parvox.blocks import Master
    from parvox.particles import abc_field, seed_points, trace, trace_serial

    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    field = abc_field()
    seeds = seed_points(field, 23, seed=3)
    ref = trace_serial(field, seeds, 60, 0.05)
    for n, assign in _block_counts(size, quick):
        for arrivals in (4,) if quick else (1, 4):
            ends = trace(Master(n, assign), field, seeds, 60, 0.05, arrivals=arrivals,
                         root=size - 1)
            if rank == size - 1:
                assert np.abs(ends - ref).max() <= 1e-9, f"{n} blocks {assign} at {size} ranks"
            else:
                assert ends is None


mpi_tests(
    globals(),
    {"blocks_merge_swap": run_merge_swap, "blocks_exchange": run_exchange,
     "compositing": run_compositing, "particles": run_particles},
    ranks=SCALE_RANKS,
    timeout=240,
    marks=[pytest.mark.scale],
)
