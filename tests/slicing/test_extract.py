"""Parallel extraction at 1-4 ranks: equal to the reference and to the serial result."""

import numpy as np

from parvox.testing import mpi_test


def _shared_dir(comm):
    import tempfile
    from pathlib import Path

    return Path(comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None))


def _planes(spacing, n, seed):
    from parvox.slicing import Plane

    rng = np.random.default_rng(seed)
    shape = np.array([37, 45, 53])
    out = []
    for t in range(n):
        kwargs = {
            "size": tuple(int(s) for s in rng.integers(8, 40, 2)),
            "step": float(rng.uniform(0.5, 1.5)),
            "zoom": int(t % 3 + 1),
            "spacing": spacing,
        }
        c = rng.uniform(0, shape)
        if t % 4 == 3:
            out.append(Plane.from_normal(center=c, normal=rng.normal(size=3), **kwargs))
        else:
            out.append(Plane(center=c, u=rng.normal(size=3), v=rng.normal(size=3), **kwargs))
    return out


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_parallel_slices_equal_reference_and_serial():
    import shutil

    from mpi4py import MPI

    from parvox.slicing import SliceEngine, finish_slice, reference_slice
    from parvox.volume import ingest, parse_disk_map

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    root = _shared_dir(comm)
    rng = np.random.default_rng(42)
    scalar = (rng.random((37, 45, 53), dtype=np.float32) * 1000).astype(np.float32)
    rgb = rng.integers(0, 256, (37, 45, 53, 3)).astype(np.uint8)
    cases = [
        (scalar, (5, 7, 6), 5, (2.0, 1.0, 0.8), None),
        (rgb, (17, 32, 32), 3, (1.0, 1.0, 1.0), None),
        (scalar, (17, 32, 32), 4, (1.0, 0.5, 0.5), {str(size - 1): [0, 1, 2, 3]}),
    ]
    for i, (vol, extent, ndisks, spacing, dmap) in enumerate(cases):
        path = ingest(vol, root / f"s{i}", ndisks=ndisks, extent=extent, spacing=spacing,
                      progress=False)
        disk_map = None if dmap is None else parse_disk_map(dmap, ndisks, size)
        with SliceEngine(path, disk_map=disk_map, threads=2) as eng, SliceEngine(
            path, comm=MPI.COMM_SELF
        ) as serial:
            if disk_map is not None and rank != size - 1:
                assert eng.source.disks == ()
            for plane in _planes(spacing, 8, seed=i):
                got = eng.extract(plane, raw=True)
                if rank != 0:
                    assert got is None
                    continue
                ref = reference_slice(vol, plane)
                tol = 1e-5 * max(1.0, float(np.abs(ref).max()))
                np.testing.assert_allclose(got, ref, rtol=1e-5, atol=tol)
                # bit for bit the serial result, whatever the rank count
                assert np.array_equal(got, serial.extract(plane, raw=True))
                if vol.dtype == np.uint8:
                    rounded = finish_slice(got, np.uint8).astype(int)
                    assert np.abs(rounded - np.rint(ref).astype(int)).max() <= 1
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(root)


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_corrupted_extent_fails_loudly_without_deadlock():
    import shutil

    import pytest
    from mpi4py import MPI

    from parvox.slicing import Plane, SliceEngine, SliceError
    from parvox.volume import ChecksumError, VolumeStore, ingest

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    root = _shared_dir(comm)
    vol = np.random.default_rng(1).random((37, 45, 53), dtype=np.float32)
    path = ingest(vol, root / "s", ndisks=4, extent=(5, 7, 6), progress=False)
    key = (4, 3, 4)
    store = VolumeStore(path)
    disk, offset = store.locate(*key)
    if rank == 0:
        with open(store.file_path(disk), "r+b") as fh:
            fh.seek(offset + 12)
            fh.write(b"\xff\xff\xff\xff")
    comm.Barrier()
    plane = Plane(center=(22, 22, 26), u=(0, 0, 1), v=(0, 1, 0), size=(45, 53))
    owner = disk % size
    with SliceEngine(path) as eng:
        if rank == owner:
            with pytest.raises(ChecksumError, match=f"disk {disk}, extent \\(4, 3, 4\\)"):
                eng.extract(plane)
        elif rank == 0:
            with pytest.raises(SliceError, match=f"rank {owner}.*extent \\(4, 3, 4\\)"):
                eng.extract(plane)
        else:
            assert eng.extract(plane) is None
        # the engine still works for planes that avoid the bad extent
        ok = eng.extract(Plane(center=(2, 22, 26), u=(0, 0, 1), v=(0, 1, 0), size=(45, 53)))
        if rank == 0:
            assert ok.shape == (45, 53) and np.allclose(ok, vol[2], rtol=1e-6)
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(root)


@mpi_test(ranks=(1, 3, 4), timeout=120)
def test_extents_by_rank_partition_the_cut_in_read_order():
    import shutil

    from mpi4py import MPI

    from parvox.slicing import SliceSource, cut_extents, extents_on_disks, grid_ranges
    from parvox.volume import ingest, parse_disk_map

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    root = _shared_dir(comm)
    vol = np.random.default_rng(5).random((37, 45, 53), dtype=np.float32)
    path = ingest(vol, root / "s", ndisks=5, extent=(5, 7, 6), progress=False)
    # an uneven map: the last rank serves three disks, rank 0 none when there are several ranks
    owners = {str(size - 1): [0, 2, 4]}
    for disk, r in ((1, 1 % size), (3, (size - 2) % size)):
        owners.setdefault(str(r), []).append(disk)
    dmap = parse_disk_map(owners, 5, size)
    with SliceSource(path, disk_map=dmap) as source:
        assert source.disks == dmap.disks_of(rank)
        for plane in _planes(source.meta.spacing, 6, seed=11):
            groups = source.extents_by_rank(plane)
            assert len(groups) == size
            allkeys = cut_extents(plane, source.layout)
            got = np.concatenate([k for k, _ in groups])
            assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, allkeys.tolist()))
            for r, (keys, ranges) in enumerate(groups):
                want = extents_on_disks(plane, source.layout, dmap.disks_of(r))
                np.testing.assert_array_equal(keys.reshape(-1, 3), want.reshape(-1, 3))
                if len(keys):
                    np.testing.assert_array_equal(ranges, grid_ranges(plane, source.layout, keys))
            # this rank's parts are exactly the reference's pixels on its extents
            keys, ranges = groups[rank]
            parts = source.read_parts(plane, keys, ranges)
            assert {p.extent for p in parts.parts()} <= set(
                source.layout.linear_index(*keys.T).tolist() if len(keys) else []
            )
            assert parts.counts.sum() == parts.index.size == len(parts.values)
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(root)


def _nearest_reference(vol, plane, center, u, v, step, zoom=1, level=0):
    """NumPy's own nearest-voxel slice, independent of the kernels: pixel ``(i, j)`` of an
    ``H x W`` plane at zoom ``Z`` lies at ``center + (i - (H-1)/2) Z step v + (j - (W-1)/2)
    Z step u`` (unit spacing, level-0 voxels; a label level ``k`` is ``vol[::2**k, ...]`` at
    ``p / 2**k``), rounded half up; 0 outside ``[0, n-1]``."""
    h, w = plane.size
    f = 1 << level
    sub = vol[::f, ::f, ::f]
    i = np.arange(h, dtype=np.float64)[:, None]
    j = np.arange(w, dtype=np.float64)[None, :]
    p = np.stack([center[a] + (i - (h - 1) / 2) * zoom * step * v[a]
                  + (j - (w - 1) / 2) * zoom * step * u[a] for a in range(3)]) / f
    n = np.asarray(sub.shape).reshape(3, 1, 1)
    inside = np.all((p >= 0) & (p <= n - 1), axis=0)
    near = np.floor(p + 0.5).astype(np.int64)
    out = np.zeros((h, w), vol.dtype)
    out[inside] = sub[near[0][inside], near[1][inside], near[2][inside]]
    return out


def _label_volume(dtype, shape, seed):
    """Ids beyond float32's (2**24) and, for 64 bits, float64's (2**53) exact integers; a
    fifth of the voxels background (0)."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    lo = 2**24 + 1 if info.bits == 32 else 2**53 + 1
    ids = rng.integers(lo, int(info.max), size=shape, dtype=dtype, endpoint=True)
    ids[rng.random(shape) < 0.2] = 0
    if info.bits == 64:
        ids[0, 0, :3] = (info.max, info.max - 1, 2**53 + 1)  # neighbours float64 cannot tell
    return ids


@mpi_test(ranks=(1, 3), timeout=180)
def test_label_stores_slice_to_their_exact_ids():
    """uint32 and uint64 label stores sliced axis-aligned, obliquely, zoomed, half outside and
    at a pyramid level: every pixel the id of its nearest voxel, in the store's dtype."""
    import shutil

    from mpi4py import MPI

    from parvox.slicing import Plane, SliceEngine
    from parvox.volume import ingest_array

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    root = _shared_dir(comm)
    shape = (23, 29, 31)
    rng = np.random.default_rng(3)
    for dtype in (np.uint32, np.uint64):
        vol = _label_volume(dtype, shape, seed=int(np.iinfo(dtype).bits))
        path = root / f"labels-{np.dtype(dtype).name}"
        if rank == 0:
            ingest_array(vol, path, ndisks=3, extent=(5, 7, 6), levels=2, labels=True,
                         progress=False, comm=MPI.COMM_SELF)
        comm.Barrier()
        cases = [  # center, u, v, size, step, zoom, level
            ((11, 14, 15), (0, 0, 1), (0, 1, 0), (29, 31), 1.0, 1, 0),  # axial, whole
            ((11, 14.5, 15.5), (0, 0, 1), (1, 0, 0), (24, 32), 1.0, 1, 0),  # halves: ties
            ((11, 14, 15), (0, 0, 1), (0, 1, 0), (12, 13), 1.0, 2, 0),  # zoom: pixel centres
            ((2, 3, 4), (0, 0, 1), (0, 1, 0), (20, 20), 1.0, 1, 0),  # half outside
            ((12, 14, 15), (0, 0, 1), (0, 1, 0), (9, 10), 4.0, 1, "auto"),  # level 2
        ]
        for _ in range(3):  # oblique
            cases.append((tuple(rng.uniform(3, 20, 3)), tuple(rng.normal(size=3)),
                           tuple(rng.normal(size=3)), (int(rng.integers(9, 30)), 17),
                           float(rng.uniform(0.4, 1.2)), 1 + _ % 2, 0))
        with SliceEngine(path, threads=2) as eng:
            for center, u, v, size, step, zoom, level in cases:
                plane = Plane(center, u, v, size, step, zoom)  # asked linear: labels are not
                got = eng.extract(plane, level=level)
                raw = eng.extract(plane, raw=True, level=level)  # (collective)
                if rank != 0:
                    assert got is None and raw is None
                    continue
                k = eng.stats.level
                assert k == (2 if level == "auto" else 0)
                want = _nearest_reference(vol, plane, center, plane.u, plane.v, step, zoom, k)
                assert got.dtype == vol.dtype and got.shape == size
                assert np.array_equal(got, want), (center, u, v, zoom)
                assert np.count_nonzero(want) > 0
                assert raw.dtype == vol.dtype and np.array_equal(raw, got)
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(root)


#: dtypes whose trilinear kernel this test compiles: each new one costs a numba compile of
#: ~10 s on a clean clone (7 more took 100 s of the suite); one signed integer and float64
#: stand for the rest, which share their code path
LINEAR_DTYPES = {"uint8", "uint16", "float32", "int16", "float64"}


def test_every_store_dtype_slices_linear_and_nearest(tmp_path):
    """Every dtype a store holds slices nearest, exactly; trilinear (float path, rounded to
    the dtype) equals the SciPy reference for :data:`LINEAR_DTYPES`."""
    from mpi4py import MPI

    from parvox.slicing import SliceEngine, finish_slice, reference_slice
    from parvox.volume.manifest import DTYPES

    shape = (11, 13, 12)
    rng = np.random.default_rng(8)
    for name in DTYPES:
        dt = np.dtype(name)
        if dt.kind == "f":
            vol = rng.normal(0, 1000, shape).astype(dt)
        else:
            info = np.iinfo(dt)
            vol = rng.integers(max(info.min, -30000), min(info.max, 30000), shape,
                               endpoint=True).astype(dt)
        from parvox.volume import ingest_array

        path = ingest_array(vol, tmp_path / name, ndisks=2, extent=(4, 5, 6), progress=False,
                            comm=MPI.COMM_SELF)
        with SliceEngine(path, comm=MPI.COMM_SELF) as eng:
            plane = eng.plane(center=(5, 6.2, 5.7), normal=(1, 0.3, -0.2), size=(13, 11))
            if name in LINEAR_DTYPES:
                got = eng.extract(plane)
                ref = reference_slice(vol, plane)
                assert got.dtype == dt
                if dt.kind == "f":  # float32 pixels in the dtype
                    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-2)
                else:
                    err = got.astype(np.int64) - finish_slice(ref, dt).astype(np.int64)
                    assert np.abs(err).max() <= 1
            near = plane.with_sampling("nearest")
            got = eng.extract(near)
            assert got.dtype == dt and np.array_equal(got, reference_slice(vol, near))
            assert np.array_equal(got, _nearest_reference(vol, near, near.center, near.u,
                                                          near.v, near.step))
