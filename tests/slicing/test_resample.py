"""Serial extraction against scipy.ndimage.map_coordinates(order=1, mode='constant')."""

import numpy as np
import pytest

from parvox.slicing import (
    Part,
    Plane,
    SliceEngine,
    extract_part,
    finish_slice,
    merge_parts,
    new_rows,
    pack_parts,
    place_message,
    reference_slice,
    unpack_parts,
)
from parvox.slicing.resample import PartExtractor
from parvox.volume import Layout, ingest_array

SHAPE = (37, 45, 53)


def _volume(kind, seed=5):
    rng = np.random.default_rng(seed)
    if kind == "float32":
        return (rng.random(SHAPE, dtype=np.float32) * 100).astype(np.float32)
    if kind == "uint16":
        return rng.integers(0, 65536, SHAPE).astype(np.uint16)
    if kind == "rgb":
        return rng.integers(0, 256, (*SHAPE, 3)).astype(np.uint8)
    return rng.integers(0, 256, SHAPE).astype(np.uint8)


def _planes(rng, spacing, n):
    for t in range(n):
        c = rng.uniform(-4, np.array(SHAPE) + 4)
        u, v = rng.normal(size=3), rng.normal(size=3)
        if t % 7 == 0:  # axis-aligned through voxel centres, reaching the last voxel
            c = np.round(c).clip(0, np.array(SHAPE) - 1)
            u, v = (0, 0, 1), (0, 1, 0)
        yield Plane(center=c, u=u, v=v, size=tuple(int(s) for s in rng.integers(1, 48, 2)),
                    step=float(rng.uniform(0.4, 1.6)), zoom=int(rng.integers(1, 4)),
                    spacing=spacing)


def _check(got, ref, dtype):
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(ref).max()))
    else:
        diff = np.abs(got.astype(np.int64) - np.rint(ref).astype(np.int64))
        assert diff.max(initial=0) <= 1


@pytest.mark.parametrize("kind", ["float32", "uint8", "uint16", "rgb"])
@pytest.mark.parametrize("extent", [(17, 32, 32), (5, 7, 6)])
def test_random_planes_match_map_coordinates(tmp_path, kind, extent):
    from mpi4py import MPI

    vol = _volume(kind)
    spacing = (1.0, 1.0, 1.0) if kind == "uint16" else (2.5, 0.9, 0.7)
    path = ingest_array(vol, tmp_path / "s", ndisks=3, extent=extent, spacing=spacing,
                        progress=False)
    rng = np.random.default_rng(hash((kind, extent)) % 2**32)
    with SliceEngine(path, comm=MPI.COMM_SELF, cache_bytes=1 << 20) as eng:
        for plane in _planes(rng, spacing, 25):
            ref = reference_slice(vol, plane)
            raw = eng.extract(plane, raw=True)
            assert raw.dtype == np.float32 and raw.shape == ref.shape
            np.testing.assert_allclose(raw, ref, rtol=1e-5, atol=1e-5 * max(1, np.abs(ref).max()))
            got = eng.extract(plane)
            assert got.dtype == vol.dtype
            _check(got, ref, vol.dtype)


def test_compute_threads_give_the_same_slice(tmp_path):
    from mpi4py import MPI

    vol = _volume("rgb")
    path = ingest_array(vol, tmp_path / "s", ndisks=2, extent=(5, 7, 6), progress=False)
    rng = np.random.default_rng(3)
    with SliceEngine(path, comm=MPI.COMM_SELF) as one, SliceEngine(
        path, comm=MPI.COMM_SELF, compute_threads=3
    ) as three:
        for plane in _planes(rng, (1.0, 1.0, 1.0), 6):
            assert np.array_equal(one.extract(plane, raw=True), three.extract(plane, raw=True))
    with pytest.raises(ValueError, match="compute_threads"):
        SliceEngine(path, comm=MPI.COMM_SELF, compute_threads=0)


def test_plane_outside_gives_zeros_and_part_roundtrip(tmp_path):
    from mpi4py import MPI

    vol = _volume("float32")
    path = ingest_array(vol, tmp_path / "s", extent=(5, 7, 6), progress=False)
    with SliceEngine(path, comm=MPI.COMM_SELF) as eng:
        out = eng.extract(Plane(center=(500, 0, 0), u=(0, 0, 1), v=(0, 1, 0), size=(3, 4)))
        assert out.shape == (3, 4) and not out.any()
        plane = Plane(center=(18, 22, 26), u=(1, 1, 0), v=(0, 1, 1), size=(30, 30), zoom=2)
        keys = eng.local_extents(plane)
        src = eng.source
        parts = [extract_part(src.reader.get(tuple(k)), tuple(k), src.layout, plane) for k in keys]
        parts = [p for p in parts if p.index.size]
        back = unpack_parts(pack_parts(parts, 1), 1)
        assert [p.extent for p in back] == [p.extent for p in parts]
        # zoom: a pixel may take samples from several extents, whose sums add up
        np.testing.assert_allclose(merge_parts(back, plane), reference_slice(vol, plane),
                                   rtol=1e-5)
        # without zoom the parts are disjoint
        flat = Plane(center=(18, 22, 26), u=(1, 1, 0), v=(0, 1, 1), size=(30, 30))
        idx = np.concatenate([
            extract_part(src.reader.get(tuple(k)), tuple(k), src.layout, flat).index
            for k in eng.local_extents(flat)
        ])
        assert len(idx) == len(np.unique(idx)) == 900


def test_in_place_extraction_equals_the_merged_parts(tmp_path):
    from mpi4py import MPI

    vol = _volume("rgb")
    path = ingest_array(vol, tmp_path / "s", ndisks=2, extent=(5, 7, 6), progress=False)
    plane = Plane(center=(18, 22, 26), u=(1, 0.3, 0), v=(0, 1, 1), size=(33, 41))
    with SliceEngine(path, comm=MPI.COMM_SELF) as eng:
        keys = [tuple(k) for k in eng.local_extents(plane)]
        src = eng.source
        blocks = [src.reader.get(k) for k in keys]
        parts = [extract_part(b, k, src.layout, plane) for b, k in zip(blocks, keys, strict=True)]
        want = merge_parts(parts, plane, 3)
        rows = new_rows(plane, 3)
        for b, k in zip(blocks, keys, strict=True):
            assert extract_part(b, k, src.layout, plane, out=rows).index.size == 0
        np.testing.assert_array_equal(rows.reshape(want.shape), want)
        # a message is placed whole, as its unpacked parts would be merged
        rows = new_rows(plane, 3)
        place_message(pack_parts([p for p in parts if p.index.size], 3), rows, 3)
        np.testing.assert_array_equal(rows.reshape(want.shape), want)
        with pytest.raises(ValueError, match="out"):
            extract_part(blocks[0], keys[0], src.layout, Plane(**{**_kw(plane), "zoom": 2}),
                         out=rows)


def _kw(plane):
    return {"center": plane.center, "u": plane.u, "v": plane.v, "size": plane.size}


def test_part_and_finish_bad_input():
    lay = Layout((8, 8, 8), extent=(4, 4, 4))
    plane = Plane(center=(4, 4, 4), u=(0, 0, 1), v=(0, 1, 0), size=(2, 2))
    with pytest.raises(ValueError, match="block must have shape"):
        extract_part(np.zeros((4, 4, 4), np.float32), (0, 0, 0), lay, plane)
    assert finish_slice(np.array([-3.0, 70000.0], np.float32), "uint16").tolist() == [0, 65535]
    assert unpack_parts(np.empty(0, np.uint8), 1) == []
    assert merge_parts([Part(0, np.array([3]), np.array([[8.0]], np.float32))], plane)[1, 1] == 8


@pytest.mark.parametrize("shape", [(1, 45, 53), (37, 1, 53), (2, 3, 2)])
def test_degenerate_volumes(tmp_path, shape):
    from mpi4py import MPI

    vol = np.random.default_rng(9).random(shape, dtype=np.float32)
    path = ingest_array(vol, tmp_path / "s", ndisks=2, extent=(5, 7, 6), progress=False)
    rng = np.random.default_rng(10)
    with SliceEngine(path, comm=MPI.COMM_SELF) as eng:
        planes = [
            Plane(center=(0, 22, 26), u=(0, 0, 1), v=(0, 1, 0), size=(45, 53)),
            Plane(center=(18, 0, 26), u=(0, 0, 1), v=(1, 0, 0), size=(37, 53), zoom=2),
            Plane(center=(0.5, 1, 1), u=(0, 0.3, 1), v=(1, 1, 0), size=(9, 9), step=0.3),
        ] + [
            Plane(center=rng.uniform(0, shape), u=rng.normal(size=3), v=rng.normal(size=3),
                  size=(20, 20), step=0.5)
            for _ in range(5)
        ]
        for plane in planes:
            np.testing.assert_allclose(eng.extract(plane), reference_slice(vol, plane),
                                       rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "uint32", "int32"])
def test_finish_slice_is_numpy_rint_and_clip(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(4)
    span = float(info.max) - float(info.min)
    raw = (rng.random((31, 37, 3)) * span * 1.2 + float(info.min) - 0.1 * span).astype(np.float32)
    raw.flat[:6] = [0.5, 1.5, 2.5, -0.5, float(info.max) + 0.5, float(info.min) - 3]  # ties: even
    want = np.clip(np.rint(raw.astype(np.float64)), info.min, info.max).astype(dtype)
    got = finish_slice(raw, dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(finish_slice(raw[:, ::3], dtype), want[:, ::3])  # strided


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64", "float32", "float64"])
def test_slices_of_every_store_dtype(tmp_path, dtype):
    """Every store dtype slices (serially) to the linear reference, rounded and clipped to
    the dtype (64-bit extremes included, no wrap-around)."""
    from parvox.slicing import Plane, extract_slice, finish_slice, reference_slice
    from parvox.volume import ingest_array

    dt = np.dtype(dtype)
    rng = np.random.default_rng(4)
    vol = (rng.random((9, 10, 11)) * 100).astype(dt)
    if dt.kind in "iu":
        vol[4, 4:, :] = np.iinfo(dt).max
    path = ingest_array(vol, tmp_path / "s", extent=(4, 5, 6), ndisks=2, progress=False)
    plane = Plane(center=(4.3, 5.1, 5.2), u=(0.1, 0.2, 1.0), v=(0.3, 1.0, 0.0), size=(9, 12))
    raw = extract_slice(path, plane, raw=True)
    ref = reference_slice(vol, plane)
    np.testing.assert_allclose(raw, ref, rtol=1e-6, atol=1e-6 * float(np.abs(ref).max()))
    got = extract_slice(path, plane)
    assert got.dtype == dt
    np.testing.assert_array_equal(got, finish_slice(raw, dt))
    if dt.kind in "iu":
        assert got.min() >= 0  # no wrap-around at the maximum


def test_messages_carry_exact_uint64_ids():
    """Nearest parts travel in the volume's dtype: ids above 2**53 survive packing, unpacking
    and placement; a reader expecting another item size is refused."""
    import pytest

    from parvox.slicing import Plane, place_message

    plane = Plane(center=(1, 1, 1), u=(0, 0, 1), v=(0, 1, 0), size=(2, 3), sampling="nearest")
    ids = np.array([[2**64 - 1], [2**53 + 1], [2**53 + 2]], np.uint64)
    buf = pack_parts([Part(5, np.array([4, 0, 2]), ids)], 1, request=3, dtype=np.uint64)
    (part,) = unpack_parts(buf, 1, np.uint64)
    assert part.values.dtype == np.uint64 and np.array_equal(part.values, ids)
    rows = new_rows(plane, 1, np.uint64)
    place_message(buf, rows, 1)
    assert rows.ravel().tolist() == [2**53 + 1, 0, 2**53 + 2, 0, 2**64 - 1, 0]
    assert np.array_equal(merge_parts([part], plane, 1, np.uint64), rows.reshape(2, 3))
    with pytest.raises(ValueError, match="buf"):
        unpack_parts(buf, 1)  # float32: half the bytes


def test_block_refs_refuse_to_travel_to_another_process():
    """Block references are addresses in this process: pickling them (to send them to another
    rank) is refused instead of handing that rank addresses it would crash on."""
    import pickle

    from parvox.slicing.resample import BlockRefs

    refs = BlockRefs.of([np.zeros((3, 3, 3), np.uint8)] * 2, (3, 3, 3))
    with pytest.raises(TypeError, match="addresses"):
        pickle.dumps(refs)


@pytest.mark.parametrize(("dtype", "rgb"), [("uint8", False), ("uint8", True), ("int16", False),
                                           ("int32", False)])
def test_kernel_rounds_as_finish_slice(tmp_path, dtype, rgb):
    """A ``rounded`` message places the float32 message's slice rounded by
    :func:`finish_slice` (ties to even, clipped: int32's maximum rounds above itself as
    float32), bit for bit, from a quarter (uint8) of the bytes; 8- and 16-bit dtypes take
    the kernel's clip-then-round path (int16: signed, the same code as uint16), int32 its
    round-then-clip one."""
    from mpi4py import MPI

    from parvox.slicing import SliceSource
    from parvox.slicing.message import message_arrays

    dt = np.dtype(dtype)
    rng = np.random.default_rng(11)
    shape = (*SHAPE, 3) if rgb else SHAPE
    vol = rng.integers(max(-200, np.iinfo(dt).min), min(200, np.iinfo(dt).max), shape).astype(dt)
    vol[10:14] = np.iinfo(dt).max  # float32 rounds int32's maximum up: clipped
    path = ingest_array(vol, tmp_path / "s", extent=(5, 7, 6), progress=False)
    c = 3 if rgb else 1
    planes = [  # x at half voxels: (a + b) / 2, ties where a + b is odd
        Plane(center=(5, 22, 26.5), u=(0, 0, 1), v=(0, 1, 0), size=(45, 51)),
        Plane(center=(11.3, 20.2, 25.7), u=(0.3, -1.0, 0.7), v=(1, 0.2, 0), size=(37, 41)),
    ]
    ties = 0
    with SliceSource(path, comm=MPI.COMM_SELF) as src:
        for plane in planes:
            keys, ranges = src.extents_by_rank(plane)[0]
            raw, got = new_rows(plane, c), new_rows(plane, c, dt)
            buf = src.read_message(plane, keys, ranges)
            small = src.read_message(plane, keys, ranges, rounded=True)
            place_message(buf, raw, c)
            place_message(small, got, c)
            np.testing.assert_array_equal(got, finish_slice(raw, dt))
            assert message_arrays(small, c, dt)[2].size == message_arrays(buf, c)[2].size > 0
            assert small.size < buf.size or dt.itemsize == 4
            ties += int(np.sum(raw % 1 == 0.5))
        assert np.any(got == np.iinfo(dt).max)
    assert ties > 0


def test_rounded_extraction_refuses_what_it_cannot_round():
    lay = Layout((8, 8, 8), extent=(4, 4, 4))
    plane = Plane(center=(4, 4, 4), u=(0, 0, 1), v=(0, 1, 0), size=(4, 4))
    zoomed = Plane(center=(4, 4, 4), u=(0, 0, 1), v=(0, 1, 0), size=(4, 4), zoom=2)
    for bad in [(plane, "float32"), (zoomed, "uint8"), (plane.with_sampling("nearest"), "uint8")]:
        with pytest.raises(ValueError, match="rounded"):
            PartExtractor(lay, bad[0], dtype=bad[1], rounded=True)
