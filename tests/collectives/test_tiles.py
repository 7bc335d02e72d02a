"""Pipelined tiles: compressed blocks gathered tile by tile; tile auto-tuning."""

from __future__ import annotations

import zlib

import numpy as np

from parvox.testing import mpi_test


def _block(rank: int, i: int) -> np.ndarray:
    rng = np.random.default_rng(rank * 1000 + i)
    return (rng.integers(0, 4, 500 + 37 * i) * (i % 3)).astype(np.uint8)


def test_pipeline_window_and_padding_serial():
    from parvox.collectives.requests import CompletedRequest
    from parvox.collectives.tiles import pipeline

    started = []

    def start(t, items):
        started.append((t, list(items)))
        return CompletedRequest(len(items))

    assert pipeline(7, lambda i: i, start, tile=3, window=1, ntiles=4) == [3, 3, 1, 0]
    assert started[2] == (2, [6])


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_pipelined_gather_of_compressed_blocks():
    from mpi4py import MPI

    from parvox.collectives import tiles

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    counts = [3 + (i % 3) * 2 for i in range(p)]  # ranks own different numbers of blocks

    def compress(i: int) -> np.ndarray:
        return np.frombuffer(zlib.compress(_block(r, i).tobytes()), np.uint8)

    for tile, window in ((1, 1), (2, 2), (4, 3), ("auto", 2)):
        for mode in ("test", "none"):
            got = tiles.pipelined_gather(counts[r], compress, root=p - 1, tile=tile,
                                         window=window, progress=mode, candidates=(1, 3))
            if r == p - 1:
                ref = [_block(i, j) for i in range(p) for j in range(counts[i])]
                assert len(got) == len(ref)
                for a, b in zip(got, ref, strict=True):
                    np.testing.assert_array_equal(np.frombuffer(zlib.decompress(a), np.uint8), b)
            else:
                assert got is None
    res = tiles.autotune_tile(lambda t: sum(range(20000 // t)), candidates=(1, 2, 4))
    assert res.best in (1, 2, 4) and set(res.times) == {1, 2, 4}
    assert comm.allgather(res.best) == [res.best] * p
