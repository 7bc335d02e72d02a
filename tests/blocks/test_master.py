"""Master, links and the regular decomposer: cores, ghosts, owners, exchange between blocks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from parvox.blocks import Link, RegularDecomposer
from parvox.testing import mpi_test


@pytest.mark.parametrize(
    ("shape", "nblocks", "wrap", "share"),
    [
        ((11, 13, 5), 6, False, False),
        ((11, 13, 5), 6, (True, False, True), True),
        ((17,), 5, True, False),
        ((9, 7), 4, False, (True, False)),
    ],
)
def test_decomposer_cores_ghosts_owners_and_links(shape, nblocks, wrap, share):
    dec = RegularDecomposer(shape, nblocks, wrap=wrap, share_face=share, ghosts=2)
    assert dec.nblocks == nblocks
    wraps = dec.wrap
    shares = dec.share_face
    owned = np.full(shape, -1)
    for g in range(nblocks):
        ext = dec.block_grid.extents(g)
        core, bounds = dec.core(g), dec.bounds(g)
        for a, ((c0, c1), (e0, e1), (b0, b1)) in enumerate(zip(core, ext, bounds, strict=True)):
            assert c0 == e0 and c1 == (min(e1 + 1, shape[a]) if shares[a] else e1)
            lo, hi = c0 - 2, c1 + 2
            assert (b0, b1) == ((lo, hi) if wraps[a] else (max(lo, 0), min(hi, shape[a])))
        owned[tuple(slice(a, b) for a, b in ext)] = g
        link = dec.link(g)
        assert g not in link.gids and len(set(link.gids)) == len(link.gids)
        for nb, d in zip(link.gids, link.directions, strict=True):
            assert g in dec.link(nb).gids  # symmetric
            assert link.target(d) == nb
        assert link.target((9,) * len(shape)) is None
    assert (owned >= 0).all()
    for point in itertools.product(*[range(0, n, 3) for n in shape]):
        assert dec.owner(point) == owned[point]
    if all(wraps):
        assert dec.owner(tuple(n + 1 for n in shape)) == owned[(1,) * len(shape)]
    else:
        with pytest.raises(ValueError, match="outside"):
            dec.owner(tuple(n for n in shape))


def test_decomposer_and_link_reject_bad_input():
    with pytest.raises(ValueError, match="nblocks or grid"):
        RegularDecomposer((4, 4))
    with pytest.raises(ValueError, match="connectivity"):
        RegularDecomposer((4, 4), 2, connectivity="edges")
    with pytest.raises(ValueError, match="share_face"):
        RegularDecomposer((4, 4), 2, share_face=(True,))
    with pytest.raises(ValueError, match="halo"):
        RegularDecomposer((4, 4), 2, ghosts=-1)
    with pytest.raises(ValueError, match="one entry per"):
        Link((1, 2), ((1,),))
    face = RegularDecomposer((9, 9), grid=(3, 3), connectivity="face")
    full = RegularDecomposer((9, 9), grid=(3, 3))
    assert [len(face.link(g)) for g in (0, 1, 4)] == [2, 3, 4]
    assert [len(full.link(g)) for g in (0, 1, 4)] == [3, 5, 8]


@mpi_test(timeout=60)
def test_master_exchange_moves_items_along_links_and_by_reference_on_one_rank():
    from mpi4py import MPI

    from parvox.blocks import Master, RegularDecomposer

    comm = MPI.COMM_WORLD
    dec = RegularDecomposer(
        (11, 13, 5), 3 * comm.Get_size(), ghosts=1, share_face=(True, False, False)
    )
    for threads in (1, 3):
        m = Master(dec.nblocks, threads=threads)
        dec.decompose(m, lambda gid, core, bounds: np.full(dec.shape_of(bounds), gid, float))
        sent = {}

        def send(block, cp, sent=sent):
            for nb in cp.link.gids:
                item = {"from": cp.gid, "data": block[:1].copy()}
                sent[(cp.gid, nb)] = item
                cp.enqueue(nb, item)

        m.foreach(send)
        m.exchange()
        for gid in m.gids:
            cp = m.proxy(gid)
            assert cp.sources() == sorted(dec.link(gid).gids)
            for src in dec.link(gid).gids:
                (item,) = cp.dequeue(src)
                assert item["from"] == src and np.all(item["data"] == src)
                if m.is_local(src):
                    assert item is sent[(src, gid)]  # moved without MPI, no copy
            assert cp.incoming() == []
    # cores and ghost bounds of the decomposer
    for g in range(dec.nblocks):
        core, bounds = dec.core(g), dec.bounds(g)
        ext = dec.block_grid.extents(g)
        assert core[0][1] == min(ext[0][1] + 1, 11) and core[1] == ext[1]
        assert all(
            b[0] == max(c[0] - 1, 0) and b[1] == min(c[1] + 1, n)
            for b, c, n in zip(bounds, core, (11, 13, 5), strict=True)
        )
