"""Sort-last compositing (over operator, radix-k swap) against the serial front-to-back fold."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.compositing import composite_serial, over, premultiply
from parvox.testing import mpi_test


def _stack(nimages: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return premultiply(rng.random((nimages, 37, 29, 4), dtype=np.float32))


def test_over_is_the_premultiplied_formula_and_not_commutative():
    a, b = _stack(2)
    expect = a + (1 - a[..., 3:4]) * b
    np.testing.assert_allclose(over(a, b), expect, rtol=1e-6)
    assert not np.allclose(over(a, b), over(b, a))
    out = b.copy()
    over(a, out, out=out)  # in place into the back operand
    np.testing.assert_allclose(out, expect, rtol=1e-6)
    opaque = a.copy()
    opaque[..., 3] = 1.0
    np.testing.assert_array_equal(over(opaque, b), opaque)


def test_over_and_serial_reject_bad_images():
    a = _stack(1)[0]
    with pytest.raises(TypeError, match="float32"):
        over(a.astype(np.float64), a)
    with pytest.raises(ValueError, match="4 channels"):
        over(a[..., :3], a[..., :3])
    with pytest.raises(ValueError, match="one shape"):
        over(a, a[1:])
    with pytest.raises(ValueError, match="empty"):
        composite_serial([])


@mpi_test(timeout=120)
def test_composite_matches_serial_at_1_3_8_images_per_rank():
    from mpi4py import MPI

    from parvox.blocks import Master
    from parvox.compositing import composite

    size = MPI.COMM_WORLD.Get_size()
    rank = MPI.COMM_WORLD.Get_rank()
    for per_rank, ks in ((1, (2, 4, 8)), (3, (2, 8)), (8, (4, 8))):
        b = per_rank * size
        stack = _stack(b, seed=b)
        ref = composite_serial(stack)
        m = Master(b, "round_robin" if per_rank == 3 else "contiguous")
        images = {g: stack[g].copy() for g in m.gids}
        for img in images.values():
            img.flags.writeable = False  # e.g. memory-mapped input: arrives read-only too
        for k in ks:
            for threads in (1, 2):
                img = composite(m, images, k=k, gather=size - 1, threads=threads)
                if rank == size - 1:
                    np.testing.assert_allclose(img, ref, rtol=1e-5, atol=1e-6)
                else:
                    assert img is None
        for g in m.gids:
            np.testing.assert_array_equal(images[g], stack[g])  # inputs untouched
        # distributed result: each block knows where its pixels lie
        pieces = composite(m, images, k=ks[-1], gather=None)
        flat = ref.reshape(-1, 4)
        cover = np.zeros(len(flat), int)
        for start, stop, pixels in pieces.values():
            np.testing.assert_allclose(pixels, flat[start:stop], rtol=1e-5, atol=1e-6)
            cover[start:stop] += 1
        assert MPI.COMM_WORLD.allreduce(cover).tolist() == [1] * len(flat)


@mpi_test(timeout=120)
def test_composite_explicit_k_lists_partial_rounds_and_bad_k():
    from mpi4py import MPI

    from parvox.blocks import Master, RegularSwapPartners
    from parvox.compositing import composite

    for b, k in ((8, [4, 2]), (8, [2, 2, 2]), (12, [3, 2, 2]), (10, 8), (7, 8)):
        stack = _stack(b, seed=3)
        m = Master(b)
        img = composite(m, {g: stack[g] for g in m.gids}, k=k)
        if MPI.COMM_WORLD.Get_rank() == 0:
            np.testing.assert_allclose(img, composite_serial(stack), rtol=1e-5, atol=1e-6)
    # one round of [4, 2] on 8 images: each block holds its group of 4, composited
    stack = _stack(8, seed=4)
    m = Master(8)
    p = RegularSwapPartners(8, [4, 2], rounds=1)
    pieces = composite(m, {g: stack[g] for g in m.gids}, k=[4, 2], rounds=1, gather=None)
    for g, (start, stop, pixels) in pieces.items():
        base = g - p.position(0, g)
        ref = composite_serial(stack[base : base + 4]).reshape(-1, 4)
        np.testing.assert_allclose(pixels, ref[start:stop], rtol=1e-5, atol=1e-6)
    images = {g: stack[g] for g in m.gids}
    with pytest.raises(ValueError, match="do not fit 8 blocks"):
        composite(m, images, k=[4, 4])
    with pytest.raises(ValueError, match=">= 2"):
        composite(m, images, k=1)
    with pytest.raises(TypeError, match="float32"):
        composite(m, {g: a.astype(np.float64) for g, a in images.items()})
