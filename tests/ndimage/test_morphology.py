"""parvox.ndimage morphology and distance transform against scipy.ndimage, at 1-4 ranks.

scipy's own tests run through the oracle (test_scipy_suite.py) on small arrays; these bodies
add what they do not reach: images cut into many thin blocks, so that iterated operations and
the distance transform cross several blocks, round-robin layouts, and both ways of filling
holes.
"""

from __future__ import annotations

import numpy as np
import scipy.ndimage as ndi

from parvox.testing import mpi_test


def _blobs(shape: tuple[int, ...], seed: int, level: float = 0.5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return ndi.gaussian_filter(rng.random(shape), 1.5) > level


def _layouts(nranks: int) -> list[dict]:
    return [{}, {"nblocks": 3 * nranks + 2}, {"nblocks": 9, "assignment": "round_robin"},
            {"nblocks": 11, "axis": 0}]


@mpi_test(ranks=(1, 2, 3, 4), timeout=240)
def test_binary_morphology_iterations_masks_and_holes():
    from mpi4py import MPI

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    a = _blobs((47, 39), seed=4)
    mask = _blobs((47, 39), seed=8, level=0.45)
    ball = ndi.generate_binary_structure(2, 2)
    odd = np.array([[0, 1, 1], [0, 1, 0], [0, 0, 0]], bool)  # centre true, not symmetric
    ring = np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1]], bool)  # centre false
    for layout in _layouts(MPI.COMM_WORLD.Get_size()):
        x = DistArray.from_global(a, **layout)
        m = DistArray.from_global(mask, **layout)
        for name in ("binary_erosion", "binary_dilation", "binary_opening", "binary_closing"):
            for kw in (
                {"iterations": 3},  # reach 3 on blocks of 4-5 rows: several blocks away
                {"structure": ball, "iterations": 2, "border_value": 1},
                {"structure": odd, "iterations": 2, "origin": (0, -1)},
                {"iterations": -1, "mask": mask},  # until nothing changes, in rounds
                {"structure": ring, "iterations": 0},
            ):
                ours = dict(kw, mask=m) if "mask" in kw else kw
                got = getattr(pnd, name)(x, **ours).allgather()
                want = getattr(ndi, name)(a, **kw)
                np.testing.assert_array_equal(got, want, err_msg=f"{name} {kw} {layout}")
        # holes: by labelling the background, and by dilation rounds (a 5x5 structure)
        for structure in (None, ball, np.ones((5, 5), bool)):
            np.testing.assert_array_equal(
                pnd.binary_fill_holes(x, structure).allgather(),
                ndi.binary_fill_holes(a, structure), err_msg=f"fill_holes {layout}",
            )
        # grey morphology with a non-flat structure and a footprint
        g = (np.random.default_rng(2).random((47, 39)) * 100).astype(np.int16)
        gx = DistArray.from_global(g, **layout)
        for name in ("grey_erosion", "grey_dilation"):
            for kw in ({"size": (3, 7)}, {"footprint": ball, "mode": "wrap"},
                       {"structure": np.arange(9).reshape(3, 3), "mode": "constant", "cval": 5}):
                np.testing.assert_array_equal(
                    getattr(pnd, name)(gx, **kw).allgather(), getattr(ndi, name)(g, **kw),
                    err_msg=f"{name} {kw} {layout}",
                )


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_distance_transform_edt_features_and_distances_across_pencils():
    from mpi4py import MPI

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray
    from parvox.errors import ParameterError

    nranks = MPI.COMM_WORLD.Get_size()
    for shape, level in (((41, 29), 0.6), ((13, 11, 17), 0.55), ((57,), 0.6)):
        a = _blobs(shape, seed=len(shape), level=level)
        for layout in ({}, {"nblocks": 2 * nranks + 1}, {"nblocks": 7, "assignment": "round_robin"}):
            x = DistArray.from_global(a, **layout)
            for sampling in (None, [1.5, 0.5, 2.0][: len(shape)]):
                d, i = pnd.distance_transform_edt(x, sampling, return_indices=True)
                wd, wi = ndi.distance_transform_edt(a, sampling, return_indices=True)
                np.testing.assert_array_equal(d.allgather(), wd)  # ties broken as scipy does
                np.testing.assert_array_equal(i.allgather(), wi)
                assert d.grid == x.grid and i.grid.grid == (1, *x.grid.grid)
            # filled in place, as scipy fills output arrays
            dist = x.like(np.float64)
            assert pnd.distance_transform_edt(x, distances=dist) is None
            np.testing.assert_array_equal(dist.allgather(), ndi.distance_transform_edt(a))
            # threads per rank share each rank's lines: the same result, bit for bit
            np.testing.assert_array_equal(pnd.distance_transform_edt(x, threads=3).allgather(),
                                          dist.allgather())
            d, i = pnd.distance_transform_edt(x, sampling, return_indices=True, threads=2)
            np.testing.assert_array_equal(d.allgather(), wd)
            np.testing.assert_array_equal(i.allgather(), wi)
        # lines that cross many thin blocks, some without any zero
        x = DistArray.from_global(a, nblocks=min(a.shape[0], 11), axis=0)
        np.testing.assert_array_equal(pnd.distance_transform_edt(x, threads=2).allgather(),
                                      ndi.distance_transform_edt(a))
    # ghosted blocks, one of them a single element (contiguous although ghosted)
    g = np.array([[1], [1], [0]], bool)
    x = DistArray.from_global(g, nblocks=2, ghost=1)
    np.testing.assert_array_equal(pnd.distance_transform_edt(x).allgather(), [[2.0], [1.0], [0.0]])
    # no background at all: scipy's "no feature" result, and its argument checks
    ones = np.ones((6, 5))
    x = DistArray.from_global(ones, nblocks=3)
    try:
        pnd.distance_transform_edt(x, threads=0)
    except ParameterError as exc:
        assert exc.param == "threads"
    else:
        raise AssertionError("threads=0 accepted")
    np.testing.assert_array_equal(pnd.distance_transform_edt(x).allgather(),
                                  ndi.distance_transform_edt(ones))
    try:
        ndi.distance_transform_edt(ones, return_distances=False)
    except RuntimeError as exc:
        message = str(exc)
    try:
        pnd.distance_transform_edt(x, return_distances=False)
    except RuntimeError as exc:
        assert str(exc) == message
    else:
        raise AssertionError("parvox accepted what scipy refuses")
