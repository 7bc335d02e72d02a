"""Streamed local operations (issue 26 part 5): file to file, slab by slab, within a budget;
the result equals scipy on the whole array bit for bit, at 1-3 ranks."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.errors import ParameterError
from parvox.ndimage._memory import parse_bytes
from parvox.ndimage._reach import z_reach
from parvox.ndimage.stream import slab_bytes, slab_planes, stream_filter
from parvox.testing import mpi_test

RNG = np.random.default_rng(26)
VOLUME = RNG.random((23, 11, 9)).astype(np.float32)
BYTES = RNG.integers(0, 256, (19, 7, 10)).astype(np.uint8)
MASK = ndi.gaussian_filter(RNG.random((21, 9, 8)), 1.5) > 0.5
IMAGE = RNG.random((29, 13))  # 2-D, float64
WEIGHTS = RNG.random((4, 3, 2))


@pytest.mark.parametrize(("name", "ndim", "kwargs", "want"), [
    ("gaussian_filter", 3, {"sigma": 2.0}, (8, False)),
    ("gaussian_filter", 3, {"sigma": 1.0, "truncate": 2.5, "mode": "wrap"}, (3, True)),
    ("gaussian_filter", 3, {"sigma": (0.0, 3.0, 3.0)}, (0, False)),
    ("gaussian_filter", 3, {"sigma": 2.0, "radius": 3, "axes": (0,)}, (3, False)),
    ("gaussian_filter1d", 2, {"sigma": 2.0, "axis": 1}, (0, False)),
    ("gaussian_gradient_magnitude", 3, {"sigma": 1.5}, (6, False)),
    ("gaussian_laplace", 2, {"sigma": 1.0, "mode": "wrap"}, (4, True)),
    ("sobel", 3, {"axis": 2}, (1, False)),
    ("laplace", 2, {"mode": ["wrap", "nearest"]}, (1, True)),
    ("median_filter", 3, {"size": 5}, (2, False)),
    ("percentile_filter", 3, {"percentile": 20, "size": (4, 1, 1)}, (2, False)),
    ("minimum_filter", 2, {"footprint": np.ones((6, 1), bool), "origin": (1, 0)}, (4, False)),
    ("maximum_filter1d", 3, {"size": 5, "axis": 0, "mode": "wrap"}, (2, True)),
    ("correlate", 3, {"weights": WEIGHTS}, (2, False)),
    ("convolve1d", 3, {"weights": [1.0, 2.0, 3.0, 4.0], "axis": 0, "origin": 1}, (3, False)),
    ("uniform_filter", 3, {"size": (1, 5, 5)}, (0, False)),
    ("binary_erosion", 3, {"iterations": 3}, (3, False)),
    ("binary_closing", 3, {"iterations": 2, "structure": np.ones((3, 3, 3))}, (4, False)),
    ("grey_dilation", 3, {"size": 4}, (2, False)),
])
def test_reach_follows_the_arguments(name, ndim, kwargs, want) -> None:
    assert z_reach(name, ndim, kwargs) == want


@pytest.mark.parametrize(("name", "kwargs", "words"), [
    ("label", {}, "unbounded"),
    ("distance_transform_edt", {}, "unbounded"),
    ("binary_fill_holes", {}, "unbounded"),
    ("binary_dilation", {"iterations": -1}, "until nothing changes"),
    ("uniform_filter", {"size": 3}, "running window sum"),
    ("sum_labels", {}, "not a local operation"),
])
def test_unbounded_operations_are_refused_naming_memory(name, kwargs, words) -> None:
    with pytest.raises(ParameterError, match=words) as info:
        z_reach(name, 3, kwargs, param="memory")
    assert info.value.param == "memory"


def test_uniform_streams_along_z_only_integer_data() -> None:
    assert z_reach("uniform_filter", 3, {"size": 4}, dtype=np.uint16) == (2, False)
    assert z_reach("uniform_filter1d", 2, {"size": 5, "axis": 0, "origin": 1}, dtype=bool) == (
        3, False)
    for dtype in (np.float32, np.int64, None):
        with pytest.raises(ParameterError, match="running window sum"):
            z_reach("uniform_filter", 3, {"size": 3}, dtype=dtype)


def test_budgets_are_sizes_and_must_fit_one_slab() -> None:
    assert parse_bytes("2GiB", "memory") == 2 * 2**30
    assert parse_bytes("1.5k", "memory") == 1536
    for bad in ("0", "-1GiB", "abc", "", "2 parsecs"):
        with pytest.raises(ParameterError, match="memory: expected a size") as info:
            parse_bytes(bad, "memory")
        assert info.value.param == "memory"
    shape = (100, 64, 64)
    one = slab_bytes(1, shape, np.uint8, np.float32, np.float32, 3)
    assert slab_planes(one, shape, np.uint8, np.float32, np.float32, 3) == 1
    assert slab_planes(10**12, shape, np.uint8, np.float32, np.float32, 3) == 100
    assert slab_planes(10**7, shape, np.uint8, np.float32, np.float32, 3, unit=8) % 8 == 0
    with pytest.raises(ParameterError, match="too small for one slab of 1 plane") as info:
        slab_planes(one - 1, shape, np.uint8, np.float32, np.float32, 3)
    assert info.value.param == "memory"
    with pytest.raises(ParameterError, match="of 8 plane"):  # a whole chunk row at least
        slab_planes(one * 2, shape, np.uint8, np.float32, np.float32, 3, unit=8)


def test_refusals_write_nothing(tmp_path: Path) -> None:
    np.save(tmp_path / "in.npy", MASK)
    for name, kw in (("label", {}), ("binary_erosion", {"iterations": 0})):
        with pytest.raises(ParameterError) as info:
            stream_filter(tmp_path / "in.npy", tmp_path / "out.npy", name, memory="1GiB", **kw)
        assert info.value.param == "memory"
    with pytest.raises(ParameterError) as info:
        stream_filter(tmp_path / "in.npy", tmp_path / "out.npy", "binary_erosion", memory="1")
    assert info.value.param == "memory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npy"]


#: (input, output name, function, keywords, scipy's result, slab planes or None for "many")
CASES = [
    (VOLUME, "g.npy", "gaussian_filter", {"sigma": 1.5}, ndi.gaussian_filter(VOLUME, 1.5), 1),
    (VOLUME, "gw.zarr", "gaussian_filter", {"sigma": 1.2, "mode": "wrap"},
     ndi.gaussian_filter(VOLUME, 1.2, mode="wrap"), None),
    (VOLUME, "m.tif", "median_filter", {"size": 4, "mode": "mirror", "threads": 2},
     ndi.median_filter(VOLUME, 4, mode="mirror"), None),
    (BYTES, "p.ome.zarr", "percentile_filter", {"percentile": 30, "size": 3},
     ndi.percentile_filter(BYTES, 30, size=3), None),
    (VOLUME, "s.nii", "sobel", {"axis": 0}, ndi.sobel(VOLUME, 0), None),
    (VOLUME, "ggm.store", "gaussian_gradient_magnitude", {"sigma": 1.0, "threads": 3},
     ndi.gaussian_gradient_magnitude(VOLUME, 1.0), None),
    (VOLUME, "c.npy", "correlate", {"weights": WEIGHTS, "mode": "nearest"},
     ndi.correlate(VOLUME, WEIGHTS, mode="nearest"), None),
    (MASK, "o.zarr", "binary_opening", {"iterations": 2}, ndi.binary_opening(MASK, iterations=2),
     None),
    (BYTES, "e.npy", "grey_erosion", {"size": 3}, ndi.grey_erosion(ndi.grey_erosion(BYTES, 3), 3),
     None),
    (IMAGE, "l.npy", "laplace", {"mode": "wrap"}, ndi.laplace(IMAGE, mode="wrap"), 1),
    (IMAGE, "u.tif", "uniform_filter", {"size": (1, 4)}, ndi.uniform_filter(IMAGE, (1, 4)), None),
    (BYTES, "un.npy", "uniform_filter", {"size": 4, "mode": "wrap"},
     ndi.uniform_filter(BYTES, 4, mode="wrap"), 1),  # integer sums: exact wherever they start
]


@mpi_test(ranks=(1, 3), timeout=240)
def test_streamed_results_equal_scipy_bit_for_bit() -> None:
    from mpi4py import MPI

    from parvox.io import read

    world = MPI.COMM_WORLD
    tmp = Path(world.bcast(tempfile.mkdtemp(prefix="parvox-stream-") if world.rank == 0 else None))
    for i, (array, out, name, kw, want, planes) in enumerate(CASES):
        src = tmp / f"in{i}.npy"
        if world.rank == 0:
            np.save(src, array)
        world.Barrier()
        repeat = 2 if name == "grey_erosion" else 1
        reach = z_reach(name, array.ndim, kw, repeat=repeat, dtype=array.dtype)[0]
        k = planes or 4
        kernel = "binary" if name.startswith("binary_") else "separable"
        extra = 1 if out.endswith(".store") else 0  # a store's extents overlap by a plane
        memory = slab_bytes(k + extra, array.shape, array.dtype, array.dtype, want.dtype, reach,
                            kernel)
        chunks = (3, 5, 5)[: array.ndim] if out.endswith(("zarr", "store")) else None
        seen: list[tuple[int, int]] = []
        done = stream_filter(src, tmp / out, name, memory=memory, repeat=repeat, chunks=chunks,
                             progress=lambda d, t, log=seen: log.append((d, t)), **kw)
        got = read(tmp / out).allgather()
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        assert np.array_equal(got, want), (name, out, world.size)  # bit for bit
        assert done.reach == reach and done.slabs >= -(-array.shape[0] // done.planes)
        assert done.planes == (3 if chunks else k), (name, done.planes)
        if world.rank == 0:
            assert seen and seen[-1][0] == seen[-1][1]  # the bar ran over this rank's slabs
    world.Barrier()
    # an existing output needs overwrite; a budget too small writes nothing either
    if world.rank == 0:
        np.save(tmp / "in.npy", VOLUME)
    world.Barrier()
    before = sorted(p.name for p in tmp.iterdir())
    with pytest.raises(ValueError, match="exists"):
        stream_filter(tmp / "in.npy", tmp / "g.npy", "gaussian_filter", memory="1GiB", sigma=1)
    with pytest.raises(ParameterError, match="too small"):
        stream_filter(tmp / "in.npy", tmp / "new.npy", "gaussian_filter", memory="1KiB", sigma=1)
    world.Barrier()
    assert sorted(p.name for p in tmp.iterdir()) == before
    world.Barrier()
    if world.rank == 0:
        import shutil

        shutil.rmtree(tmp)
