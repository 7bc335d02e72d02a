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
