"""The 1-D squared-distance passes against scipy.ndimage.distance_transform_edt (serial)."""

from __future__ import annotations

import numpy as np
import scipy.ndimage as ndi

from parvox.ndimage._edt import TILE, edt_axis


def _passes(a: np.ndarray, order: list[int]) -> np.ndarray:
    f = np.where(a, np.inf, 0.0)
    for k, d in enumerate(order):
        pre = int(np.prod(a.shape[:d]))
        post = int(np.prod(a.shape[d + 1 :]))
        edt_axis(f.reshape(pre, a.shape[d], post), k == 0)
    return np.sqrt(f)


def test_any_pass_order_gives_scipys_distances() -> None:
    rng = np.random.default_rng(7)
    for _ in range(60):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(v) for v in rng.integers(1, 2 * TILE + 3, nd))
        a = rng.random(shape) > rng.random() * 0.4 + 0.55
        a.flat[int(rng.integers(a.size))] = False  # some background
        got = _passes(a, [int(d) for d in rng.permutation(nd)])
        np.testing.assert_array_equal(got, ndi.distance_transform_edt(a))


def test_lines_without_background_stay_infinite_until_a_later_pass() -> None:
    a = np.ones((5, 40), bool)
    a[4, 39] = False
    f = np.where(a, np.inf, 0.0)
    edt_axis(f.reshape(5, 40, 1), True)  # along axis 1: rows 0-3 have no background
    assert np.isinf(f[:4]).all() and f[4, 0] == 39.0**2
    edt_axis(f.reshape(1, 5, 40), False)
    np.testing.assert_array_equal(np.sqrt(f), ndi.distance_transform_edt(a))
