"""Neighbourhood exchange: uneven neighbour counts, data-dependent work, global termination."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from parvox.testing import mpi_test


def _route(name: str, hops: int, gid: int, link: tuple[int, ...]) -> list[tuple[int, str, int]]:
    """Where a token goes next: a random neighbour, sometimes spawning a child (deterministic)."""
    rng = np.random.default_rng([zlib.crc32(name.encode()), hops, gid])
    out = [(int(link[rng.integers(len(link))]), name, hops - 1)]
    if rng.random() < 0.25 and len(name) < 8:
        out.append((int(link[rng.integers(len(link))]), name + "c", hops - 1))
    return out


def _seeds(nblocks: int, seed: int) -> dict[int, list[tuple[str, int]]]:
    rng = np.random.default_rng(seed)
    out: dict[int, list[tuple[str, int]]] = {g: [] for g in range(nblocks)}
    for t in range(3 * nblocks):
        out[int(rng.integers(nblocks))].append((f"t{t}", int(rng.integers(0, 12))))
    return out


def _model(dec, seeds) -> list[tuple[str, int, int]]:
    finished, todo = [], [(g, n, h) for g, ts in seeds.items() for n, h in ts]
    while todo:
        g, name, hops = todo.pop()
        if hops == 0:
            finished.append((name, g, 0))
            continue
        todo.extend(_route(name, hops, g, dec.link(g).gids))
    return sorted(finished)


@mpi_test(timeout=120)
def test_random_data_dependent_walks_terminate_with_the_serial_outcome():
    from mpi4py import MPI

    from parvox.blocks import Master, RegularDecomposer, iexchange

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    cases = [
        ((9, 7), 3 * size, False, "full"),  # 2-D, corners 3 links, edges 5, inside 8
        ((31,), 2 * size + 1, False, "face"),  # chain: ends 1 link, others 2
        ((8, 6, 5), 8, True, "face"),  # periodic 3-D
    ]
    for seed, (shape, nblocks, wrap, conn) in enumerate(cases):
        dec = RegularDecomposer(shape, nblocks, wrap=wrap, connectivity=conn)
        counts = {len(dec.link(g)) for g in range(dec.nblocks)}
        assert len(counts) > 1 or wrap  # uneven neighbour counts
        seeds = _seeds(dec.nblocks, seed)
        expect = _model(dec, seeds)
        for arrivals in (1, 2, 7):
            for assign in ("contiguous", "round_robin"):
                m = Master(dec.nblocks, assign)
                dec.decompose(
                    m, lambda gid, core, bounds, s=seeds: {"done": [], "new": list(s[gid])}
                )

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
                assert stats.phases >= 1
                got = comm.allgather([t for _, b in m for t in b["done"]])
                assert sorted(t for part in got for t in part) == expect
                sent = comm.allreduce(stats.messages_sent)
                assert sent == comm.allreduce(stats.messages_received)


@mpi_test(timeout=60)
def test_exchange_rejects_unlinked_targets_and_bad_arrivals():
    from mpi4py import MPI

    from parvox.blocks import Master, RegularDecomposer, iexchange

    size = MPI.COMM_WORLD.Get_size()
    dec = RegularDecomposer((20,), 2 * size, connectivity="face")
    m = Master(dec.nblocks)
    dec.decompose(m, lambda gid, core, bounds: None)
    with pytest.raises(ValueError, match="arrivals"):
        iexchange(m, lambda b, cp: None, arrivals=0)
    far = dec.nblocks - 1

    def bad(block, cp):
        if cp.gid == 0:
            cp.enqueue(far, "x")

    if m.is_local(0) and far not in dec.link(0).gids:
        with pytest.raises(ValueError, match="not one of its neighbours"):
            from parvox.blocks.exchange import ExchangeStats, _compute

            _compute(m, bad, True, ExchangeStats())
    with pytest.raises(ValueError, match="gid in"):
        m.proxy(m.gids[0]).enqueue(dec.nblocks, "x")
    with pytest.raises(ValueError, match="belongs to rank"):
        other = next((g for g in range(dec.nblocks) if not m.is_local(g)), None)
        if other is None:
            raise ValueError("belongs to rank (single rank: nothing to check)")
        m.add(other, None)
