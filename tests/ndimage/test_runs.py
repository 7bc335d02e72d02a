"""The run-based local labeller against scipy.ndimage.label (serial: one block)."""

from __future__ import annotations

import numpy as np
import scipy.ndimage as ndi

from parvox.ndimage._runs import label_block, supported


def test_labels_numbers_and_first_pixels_equal_scipys() -> None:
    rng = np.random.default_rng(5)
    checked = 0
    for trial in range(120):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(v) for v in rng.integers(1, 8, nd))
        a = rng.random(shape) > rng.random()
        if trial % 2:  # a random symmetric structure (with holes: some stay with scipy)
            st = rng.random((3,) * nd) > 0.5
            st |= st[(slice(None, None, -1),) * nd]
        else:
            st = ndi.generate_binary_structure(nd, int(rng.integers(1, nd + 1)))
        if not supported(a, st):
            continue
        out = np.full(shape, -1, np.int32)
        n, first = label_block(a, st, out)
        want, nw = ndi.label(a, st)
        assert n == nw
        np.testing.assert_array_equal(out, want)
        flat = want.ravel()
        assert first.tolist() == [int(np.argmax(flat == k)) for k in range(1, n + 1)]
        checked += 1
    assert checked > 60


def test_strided_output_view() -> None:
    a = np.random.default_rng(2).random((6, 9, 7)) > 0.4
    padded = np.zeros((8, 11, 9), np.int32)
    st = ndi.generate_binary_structure(3, 2)
    n, _ = label_block(a, st, padded[1:-1, 1:-1, 1:-1])
    want, nw = ndi.label(a, st)
    assert n == nw
    np.testing.assert_array_equal(padded[1:-1, 1:-1, 1:-1], want)
    assert not padded[0].any() and not padded[:, 0].any() and not padded[:, :, -1].any()


def test_structures_it_leaves_to_scipy() -> None:
    a = np.ones((3, 3), bool)
    assert not supported(a, np.array([[0, 1, 0], [0, 1, 0], [0, 1, 0]], bool))  # no row links
    assert not supported(a, np.array([[1, 0, 1], [1, 1, 1], [1, 0, 1]], bool))  # a hole
    assert not supported(np.ones((2,) * 4, bool), np.ones((3,) * 4, bool))  # four axes
