"""The run-based local labeller against scipy.ndimage.label (serial: one block)."""

from __future__ import annotations

import numpy as np
import scipy.ndimage as ndi

from parvox.ndimage._runs import label_block, label_runs, part_bounds, supported
from parvox.threads import ThreadTeam


def test_labels_numbers_and_first_pixels_equal_scipys() -> None:
    """At 1-4 threads (parts of planes or rows, seams across them): scipy's labels."""
    rng = np.random.default_rng(5)
    teams = [None, ThreadTeam(2), ThreadTeam(3), ThreadTeam(4)]
    checked = 0
    for trial in range(240):
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
        team = teams[trial % len(teams)]
        n, first = label_block(a, st, out, team)
        want, nw = ndi.label(a, st)
        assert n == nw, (shape, team and team.threads)
        np.testing.assert_array_equal(out, want)
        flat = want.ravel()
        assert first.tolist() == [int(np.argmax(flat == k)) for k in range(1, n + 1)]
        checked += 1
    for team in teams[1:]:
        team.close()
    assert checked > 120


def test_parts_are_slabs_of_planes_else_of_rows() -> None:
    assert part_bounds((9, 4, 5), 3).tolist() == [0, 12, 24, 36]
    assert part_bounds((2, 4, 5), 3).tolist() == [0, 2, 5, 8]  # fewer planes than parts
    assert part_bounds((2, 5), 4).tolist() == [0, 1, 2]  # fewer rows than parts: no empty part
    assert part_bounds((5,), 2).tolist() == [0, 1]


def test_strided_output_view() -> None:
    a = np.random.default_rng(2).random((6, 9, 7)) > 0.4
    padded = np.zeros((8, 11, 9), np.int32)
    st = ndi.generate_binary_structure(3, 2)
    want, nw = ndi.label(a, st)
    for threads in (1, 2):
        padded[...] = 0
        with ThreadTeam(threads) as team:
            n, _ = label_block(a, st, padded[1:-1, 1:-1, 1:-1], team)
        assert n == nw
        np.testing.assert_array_equal(padded[1:-1, 1:-1, 1:-1], want)
        assert not padded[0].any() and not padded[:, 0].any() and not padded[:, :, -1].any()


def test_structures_it_leaves_to_scipy() -> None:
    a = np.ones((3, 3), bool)
    assert not supported(a, np.array([[0, 1, 0], [0, 1, 0], [0, 1, 0]], bool))  # no row links
    assert not supported(a, np.array([[1, 0, 1], [1, 1, 1], [1, 0, 1]], bool))  # a hole
    assert not supported(np.ones((2,) * 4, bool), np.ones((3,) * 4, bool))  # four axes


def test_runs_paint_the_shell_only_and_through_a_map() -> None:
    a = np.random.default_rng(3).random((5, 6, 7)) > 0.5
    st = ndi.generate_binary_structure(3, 1)
    want, nw = ndi.label(a, st)
    for threads in (1, 2):
        with ThreadTeam(threads) as team:
            runs = label_runs(a, st, team)
            assert runs.n == nw
            for axes in [(True, False, False), (False, True, False), (False, False, True),
                         (True, True, True)]:
                out = np.full(a.shape, -1, np.int32)
                runs.paint_shell(out, axes)
                face = np.zeros(a.shape, bool)
                for ax, on in enumerate(axes):
                    if on:
                        face[(slice(None),) * ax + (0,)] = True
                        face[(slice(None),) * ax + (-1,)] = True
                np.testing.assert_array_equal(out[face], want[face])
                assert (out[~face] == -1).all()
            lut = (np.arange(nw + 1) * 3).astype(np.float32)
            out = np.empty(a.shape, np.float32)
            runs.paint(out, lut)
            np.testing.assert_array_equal(out, lut[want])


def test_components_across_every_part_keep_scipys_numbers() -> None:
    """Components that wind through all parts (the numbering runs in place in the union-find,
    the parts reading each other's roots): scipy's labels and first pixels at 2-5 threads."""
    rng = np.random.default_rng(8)
    st = ndi.generate_binary_structure(3, 1)
    for density in (0.35, 0.55, 0.7):
        a = ndi.uniform_filter(rng.random((23, 17, 29)), 3) > 1 - density
        want, nw = ndi.label(a, st)
        for threads in (2, 3, 5):
            out = np.full(a.shape, -1, np.int32)
            with ThreadTeam(threads) as team:
                runs = label_runs(a, st, team)
                runs.paint(out)
            assert runs.n == nw
            np.testing.assert_array_equal(out, want)
            flat = want.ravel()
            assert runs.first.tolist() == [int(np.argmax(flat == k)) for k in range(1, nw + 1)]
