"""The 1-D squared-distance passes against scipy.ndimage.distance_transform_edt (serial)."""

from __future__ import annotations

import numpy as np
import scipy.ndimage as ndi

from parvox.ndimage._edt import (
    NO_ABOVE,
    NO_BELOW,
    TILE,
    envelope_pass,
    first_pass,
    parts,
    zero_ends,
)


def _view(a: np.ndarray, d: int) -> np.ndarray:
    return a.reshape(int(np.prod(a.shape[:d])), a.shape[d], int(np.prod(a.shape[d + 1 :])))


def _passes(a: np.ndarray, order: list[int], count: int) -> np.ndarray:
    """The passes along ``order`` (first pass first), each on ``count`` parts in turn."""
    f = np.empty(a.shape)
    m, fv = _view(a, order[0]), _view(f, order[0])
    below = np.full((m.shape[0], m.shape[2]), NO_BELOW)
    above = np.full_like(below, NO_ABOVE)
    for part in parts(m.shape[0], m.shape[2], count):
        first_pass(m, fv, below, above, *part)
    for k, d in enumerate(order[1:]):
        v = _view(f, d)
        for part in parts(v.shape[0], v.shape[2], count, TILE):
            envelope_pass(v, k == len(order) - 2, *part)
    return f if len(order) > 1 else np.sqrt(f)


def test_any_pass_order_and_any_parts_give_scipys_distances() -> None:
    rng = np.random.default_rng(7)
    for trial in range(60):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(v) for v in rng.integers(1, 2 * TILE + 3, nd))
        a = rng.random(shape) > rng.random() * 0.4 + 0.55
        a.flat[int(rng.integers(a.size))] = False  # some background
        got = _passes(a, [int(d) for d in rng.permutation(nd)], 1 + trial % 4)
        np.testing.assert_array_equal(got, ndi.distance_transform_edt(a))


def test_a_line_cut_in_two_needs_only_the_nearest_zeros_across_the_cut() -> None:
    rng = np.random.default_rng(3)
    a = rng.random((37, 3, 19)) > 0.9
    a[:, 1] = True  # lines without any zero
    a[:20, 2] = True  # zeros on one side of the cut only
    ref = np.empty(a.shape)
    none = np.full((1, 3 * 19), NO_BELOW), np.full((1, 3 * 19), NO_ABOVE)
    first_pass(_view(a, 0), _view(ref, 0), *none, 0, 1, 0, 57)
    lo_part, hi_part = _view(a[:20], 0), _view(a[20:], 0)
    ends = [np.empty((1, 57), np.int64) for _ in range(4)]
    zero_ends(lo_part, ends[0], ends[1], 0, 1, 0, 57)
    zero_ends(hi_part, ends[2], ends[3], 0, 1, 0, 57)
    assert (ends[2] == NO_ABOVE).reshape(3, 19)[1].all()
    assert (ends[0] == NO_ABOVE).reshape(3, 19)[2].all()
    got = np.empty(a.shape)
    below = np.where(ends[1] == NO_BELOW, NO_BELOW, ends[1] - 20)  # relative to a[20:]
    first_pass(lo_part, _view(got[:20], 0), none[0], np.where(ends[2] == NO_ABOVE, NO_ABOVE,
                                                            ends[2] + 20), 0, 1, 0, 57)
    first_pass(hi_part, _view(got[20:], 0), below, none[1], 0, 1, 0, 57)
    np.testing.assert_array_equal(got, ref)
    assert np.isinf(got[:, 1]).all() and np.isfinite(got[:, 2]).all()


def test_lines_without_background_stay_infinite_until_a_later_pass() -> None:
    a = np.ones((5, 40), bool)
    a[4, 39] = False
    f = np.empty(a.shape)
    first_pass(a.reshape(5, 40, 1), f.reshape(5, 40, 1), np.full((5, 1), NO_BELOW),
               np.full((5, 1), NO_ABOVE), 0, 5, 0, 1)  # along axis 1: rows 0-3 no background
    assert np.isinf(f[:4]).all() and f[4, 0] == 39.0**2
    envelope_pass(f.reshape(1, 5, 40), True, 0, 1, 0, 40)
    np.testing.assert_array_equal(f, ndi.distance_transform_edt(a))


def test_parts_cover_every_line_once() -> None:
    for pre, post, count, align in ((1, 100, 3, 8), (9, 1, 4, 1), (3, 5, 8, 8), (50, 7, 2, 8)):
        seen = np.zeros((pre, post), int)
        for i0, i1, k0, k1 in parts(pre, post, count, align):
            seen[i0:i1, k0:k1] += 1
            assert k0 % align == 0
        assert (seen == 1).all()
