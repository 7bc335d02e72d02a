"""parvox.io.read / parvox.io.write: every format at 1-4 ranks against NumPy, ownership of the
boxes read and written, atomic publication and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import mpi_test

#: (destination name, format, write keywords): every writable format, chunks that do not
#: divide the odd shape (13, 10, 7) where the format has chunks.
CASES = [
    ("a.npy", None, {}),
    ("a.raw", None, {}),
    ("a.tif", None, {}),
    ("folder", "tiff-folder", {}),
    ("a.zarr", None, {"chunks": (4, 3, 5)}),
    ("v2.zarr", "zarr-v2", {"chunks": (3, 4, 4)}),
    ("sh.zarr", None, {"chunks": (2, 3, 3), "shards": (4, 6, 6)}),
    ("a.ome.zarr", None, {"chunks": (3, 4, 4), "shards": (6, 8, 8), "spacing": (2.0, 1.0, 0.5)}),
    ("b.ome.zarr", "ome-zarr-0.4", {"chunks": (5, 4, 4), "spacing": (2.0, 1.0, 0.5)}),
    ("a.nii", None, {"spacing": (2.0, 1.0, 0.5)}),
    ("a.nii.gz", None, {"spacing": (2.0, 1.0, 0.5)}),
    ("a.store", None, {"chunks": (4, 4, 4), "spacing": (2.0, 1.0, 0.5)}),
    ("ng", "precomputed", {"chunks": (4, 3, 5), "spacing": (2.0, 1.0, 0.5)}),
]


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_every_format_round_trips_exactly():
    import os
    import tempfile

    from mpi4py import MPI

    from parvox import io
    from parvox.distarray import DistArray

    comm = MPI.COMM_WORLD
    tmp = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None)
    rng = np.random.default_rng(3)
    grey = rng.integers(0, 60000, (13, 10, 7)).astype(np.uint16)
    rgb = rng.integers(0, 256, (5, 6, 9, 3)).astype(np.uint8)
    for name, fmt, kw in CASES:
        for tag, a in (("grey", grey), ("rgb", rgb)):
            if tag == "rgb" and name.startswith(("a.nii", "a.raw")):
                continue
            dest = os.path.join(tmp, f"{tag}-{name}")
            d = DistArray.from_global(a, nblocks=3)  # blocks that cut y too at 3 ranks
            io.write(d, dest, format=fmt, **kw)
            raw = {"shape": a.shape, "dtype": a.dtype} if name.endswith(".raw") else {}
            back = io.read(dest, format="tiff-folder" if fmt == "tiff-folder" else None,
                           axis=1 if a.ndim == 3 else 0, **raw)
            got = back.allgather()
            assert got.dtype == a.dtype and got.shape == a.shape, (dest, got.dtype, got.shape)
            np.testing.assert_array_equal(got, a, err_msg=dest)
            r = io.open_reader(dest, **raw)
            if "spacing" in kw:
                assert r.spacing == pytest.approx(kw["spacing"]), (dest, r.spacing)
            r.close()
    # nothing but the published outputs: no temporary left behind
    assert not [f for f in os.listdir(tmp) if f.startswith(".")]


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_each_rank_reads_only_its_blocks_and_writes_whole_shards():
    import os
    import tempfile

    from mpi4py import MPI

    from parvox import io
    from parvox.distarray import DistArray
    from parvox.io.formats import zarr as zfmt

    comm = MPI.COMM_WORLD
    tmp = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None)
    a = np.arange(11 * 9 * 5, dtype=np.float32).reshape(11, 9, 5)
    written: list[tuple[slice, ...]] = []
    read: list[tuple[slice, ...]] = []
    write_box, read_box = zfmt.ZarrWriter.write_box, zfmt.ZarrReader.read_box

    def spy_write(self, bounds, data):
        written.append(bounds)
        write_box(self, bounds, data)

    def spy_read(self, bounds, level=0):
        read.append(bounds)
        return read_box(self, bounds, level)

    zfmt.ZarrWriter.write_box = spy_write
    zfmt.ZarrReader.read_box = spy_read
    try:
        dest = os.path.join(tmp, "s.zarr")
        d = DistArray.from_global(a, grid=(2, 2, 1) if comm.Get_size() > 1 else None)
        io.write(d, dest, chunks=(2, 3, 5), shards=(4, 9, 5))
        back = io.read(dest, nblocks=5)
    finally:
        zfmt.ZarrWriter.write_box, zfmt.ZarrReader.read_box = write_box, read_box
    np.testing.assert_array_equal(back.allgather(), a)
    # reading: exactly the boxes of this rank's blocks
    assert sorted(map(str, read)) == sorted(str(b.bounds) for b in back.blocks)
    # writing: whole shards (rows of 4 planes), no shard written by two ranks, all covered
    rows = [(b[0].start // 4, -(-b[0].stop // 4)) for b in written]
    assert all(b[0].start % 4 == 0 and b[1] == slice(0, 9) for b in written)
    owners = comm.allgather([r for lo, hi in rows for r in range(lo, hi)])
    flat = [r for mine in owners for r in mine]
    assert sorted(flat) == list(range(3)), owners


@mpi_test(ranks=(1, 3), timeout=120)
def test_levels_of_multiscale_sources():
    import os
    import tempfile

    import zarr
    from mpi4py import MPI

    from parvox import io
    from parvox.volume import ingest_array

    comm = MPI.COMM_WORLD
    tmp = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None)
    vol = np.random.default_rng(1).integers(0, 255, (19, 14, 11)).astype(np.uint8)
    store = ingest_array(vol, os.path.join(tmp, "s"), extent=(4, 4, 4), levels=2,
                         progress=False, comm=comm)
    from parvox.volume.store import VolumeStore

    for k in (1, 2):
        ref = VolumeStore(store, level=k).read_volume()
        got = io.read(store, level=k, nblocks=2).allgather()
        np.testing.assert_array_equal(got, ref)
    # an OME-Zarr 0.5 image with two levels, written by zarr-python as the reference
    ome = os.path.join(tmp, "m.ome.zarr")
    if comm.Get_rank() == 0:
        g = zarr.open_group(ome, mode="w", zarr_format=3)
        axes = [{"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"]
        ds = [{"path": str(k), "coordinateTransformations": [
            {"type": "scale", "scale": [2.0 * 2**k, 2.0**k, 2.0**k]}]} for k in (0, 1)]
        g.attrs["ome"] = {"version": "0.5", "multiscales": [{"axes": axes, "datasets": ds}]}
        g.create_array("0", data=vol, chunks=(5, 5, 5))
        g.create_array("1", data=vol[::2, ::2, ::2].copy(), chunks=(5, 5, 5))
    comm.Barrier()
    got = io.read(ome, level=1, nblocks=3).allgather()
    np.testing.assert_array_equal(got, vol[::2, ::2, ::2])
    r = io.open_reader(ome)
    assert r.levels == 2 and r.spacing == pytest.approx((0.002, 0.001, 0.001))
    with pytest.raises(ValueError, match="level") as info:
        io.read(ome, level=2)
    assert info.value.param == "level"


def test_written_ome_zarr_validates_and_other_readers_agree(tmp_path):
    import zarr
    from ome_zarr_models.v04 import Image as Image04
    from ome_zarr_models.v05 import Image as Image05

    from parvox import io
    from parvox.distarray import DistArray

    a = np.random.default_rng(2).integers(0, 255, (9, 7, 5, 3)).astype(np.uint8)
    for fmt, model in (("ome-zarr-0.5", Image05), ("ome-zarr-0.4", Image04)):
        dest = tmp_path / f"{fmt}.ome.zarr"
        io.write(DistArray.from_global(a), dest, format=fmt, chunks=(2, 3, 5, 3),
                 shards=(4, 6, 5, 3) if fmt.endswith("5") else None, spacing=(3.0, 2.0, 1.0),
                 levels=1)
        group = zarr.open_group(str(dest), mode="r")
        image = model.from_zarr(group)  # the independent reader validates the metadata
        attrs = image.attributes.ome if fmt.endswith("5") else image.attributes
        ms = attrs.multiscales[0]
        assert [x.name for x in ms.axes] == ["c", "z", "y", "x"]
        assert ms.datasets[0].coordinateTransformations[0].scale == [1.0, 3.0, 2.0, 1.0]
        assert ms.datasets[1].coordinateTransformations[0].scale == [1.0, 6.0, 4.0, 2.0]
        np.testing.assert_array_equal(np.asarray(group["0"][...]), np.moveaxis(a, -1, 0))


def test_tensorstore_reads_a_written_zarr_v3(tmp_path):
    ts = pytest.importorskip("tensorstore")
    from parvox import io
    from parvox.distarray import DistArray

    a = np.random.default_rng(4).random((9, 8, 7)).astype(np.float32)
    dest = tmp_path / "a.ome.zarr"
    io.write(DistArray.from_global(a), dest, chunks=(2, 4, 7), shards=(4, 8, 7))
    arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(dest / "0")}},
                  open=True).result()
    np.testing.assert_array_equal(arr.read().result(), a)


@mpi_test(ranks=(1, 2, 3), timeout=90)
def test_tiff_folder_with_a_missing_or_mismatched_slice_is_named():
    import os
    import tempfile

    import tifffile
    from mpi4py import MPI

    from parvox import io

    comm = MPI.COMM_WORLD
    tmp = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None)
    gap, odd, good = (os.path.join(tmp, n) for n in ("gap", "odd", "good"))
    if comm.Get_rank() == 0:
        for folder in (gap, odd, good):
            os.mkdir(folder)
        for i in range(12):
            plane = np.full((6, 5), i, np.uint16)
            tifffile.imwrite(os.path.join(good, f"s{i}.tif"), plane)  # s10 after s9
            if i != 4:
                tifffile.imwrite(os.path.join(gap, f"s{i:03d}.tif"), plane)
            tifffile.imwrite(os.path.join(odd, f"s{i:03d}.tif"),
                             np.zeros((6, 4), np.uint16) if i == 7 else plane)
    comm.Barrier()
    with pytest.raises(ValueError, match=r"gap: slice 4 is missing") as info:
        io.read(gap)
    assert info.value.param == "source"
    with pytest.raises(ValueError, match=r"odd: slice s007.tif has shape \(6, 4\)") as info:
        io.read(odd)
    assert info.value.param == "source"
    got = io.read(good, nblocks=4).allgather()
    np.testing.assert_array_equal(got[:, 0, 0], np.arange(12))
    glob = io.read(os.path.join(good, "s1*.tif")).allgather()  # s1, s10, s11
    np.testing.assert_array_equal(glob[:, 0, 0], [1, 10, 11])


@mpi_test(ranks=(1, 2, 4), timeout=90)
def test_bad_input_names_the_argument_and_leaves_nothing():
    import os
    import tempfile

    from mpi4py import MPI

    from parvox import io
    from parvox.distarray import DistArray
    from parvox.io.formats import zarr as zfmt

    comm = MPI.COMM_WORLD
    tmp = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None)
    d = DistArray.from_global(np.zeros((6, 5, 4), np.float32))
    bad = [
        (lambda: io.read(os.path.join(tmp, "missing.npy")), "source", "missing.npy"),
        (lambda: io.read(os.path.join(tmp)), "source", "no .tif"),
        (lambda: io.read(os.path.join(tmp, "x.npy"), format="jpeg"), "format", "jpeg"),
        (lambda: io.write(d, os.path.join(tmp, "x.jpg")), "dest", "x.jpg"),
        (lambda: io.write(d.astype(bool), os.path.join(tmp, "x.nii")), "dtype", "x.nii"),
        (lambda: io.write(d, os.path.join(tmp, "no", "x.npy")), "dest", "does not exist"),
        (lambda: io.write(d, os.path.join(tmp, "x.zarr"), chunks=(0, 1, 1)), "chunks", "chunks"),
        (lambda: io.write(d, os.path.join(tmp, "x.zarr"), format="zarr-v2", shards=2),
         "shards", "v2"),
    ]
    for call, param, text in bad:
        with pytest.raises(ValueError, match=text) as info:
            call()
        assert info.value.param == param, (param, info.value)
    io.write(d, os.path.join(tmp, "x.npy"))
    with pytest.raises(ValueError, match="exists") as info:
        io.write(d, os.path.join(tmp, "x.npy"))
    assert info.value.param == "dest"
    io.write(d, os.path.join(tmp, "x.npy"), overwrite=True)
    # a write failing on the last rank: every rank raises, nothing is published or left
    last = comm.Get_size() - 1
    original = zfmt.ZarrWriter.write_box

    def failing(self, bounds, data):
        if comm.Get_rank() == last:
            raise OSError("disk full")
        original(self, bounds, data)

    zfmt.ZarrWriter.write_box = failing
    try:
        with pytest.raises(Exception, match="disk full"):
            io.write(d, os.path.join(tmp, "f.zarr"), chunks=(1, 5, 4))
    finally:
        zfmt.ZarrWriter.write_box = original
    comm.Barrier()
    assert sorted(os.listdir(tmp)) == ["x.npy"]


def test_progress_reports_every_box_and_raw_reads_fortran_order(tmp_path):
    from parvox import io
    from parvox.distarray import DistArray

    a = np.arange(5 * 6 * 7, dtype=np.int32).reshape(5, 6, 7)
    seen: list[tuple[int, int]] = []
    io.write(DistArray.from_global(a, nblocks=3), tmp_path / "a.zarr", chunks=(2, 6, 7),
             progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1][0] == seen[-1][1]
    seen.clear()
    back = io.read(tmp_path / "a.zarr", nblocks=4,
                   progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    np.testing.assert_array_equal(back.allgather(), a)
    (tmp_path / "f.raw").write_bytes(b"HEAD" + np.asfortranarray(a).tobytes(order="F"))
    got = DistArray.read_raw(tmp_path / "f.raw", a.shape, np.int32, offset=4, order="F")
    np.testing.assert_array_equal(got.allgather(), a)
    with pytest.raises(ValueError, match="progress") as info:
        io.read(tmp_path / "a.zarr", progress="yes")
    assert info.value.param == "progress"


@mpi_test(ranks=(1, 2, 3), timeout=120)
def test_ome_zarr_pyramid_levels_are_block_means_of_the_level_below():
    import os
    import tempfile

    from mpi4py import MPI

    from parvox import io
    from parvox.distarray import DistArray
    from parvox.volume.pyramid import downsample

    comm = MPI.COMM_WORLD
    tmp = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None)
    rng = np.random.default_rng(5)
    for a, fmt in ((rng.integers(0, 60000, (13, 10, 7)).astype(np.uint16), "ome-zarr-0.5"),
                   (rng.integers(0, 256, (9, 6, 11, 3)).astype(np.uint8), "ome-zarr-0.4"),
                   (rng.integers(0, 60000, (11, 9, 7)).astype(np.uint16), "precomputed")):
        dest = os.path.join(tmp, fmt if fmt == "precomputed" else f"{fmt}.ome.zarr")
        io.write(DistArray.from_global(a), dest, format=fmt, levels=2, chunks=(2, 4, 4),
                 shards=(4, 8, 8) if fmt.endswith("5") else None, spacing=(2.0, 1.0, 1.0))
        ref = a
        r = io.open_reader(dest)
        assert r.levels == 3
        for k in (1, 2):
            ref = downsample(ref, 1)
            got = io.read(dest, level=k, nblocks=2).allgather()
            np.testing.assert_array_equal(got, ref, err_msg=f"{fmt} level {k}")
            if fmt != "precomputed":  # its scales are info's (resolution: tests/io/test_precomputed)
                assert r.scales[k] == pytest.approx((2.0 * 2**k, 2.0**k, 2.0**k))


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_store_is_written_directly_by_rows_exactly_with_levels_and_codecs():
    import os
    import tempfile

    from mpi4py import MPI

    from parvox import io
    from parvox.distarray import DistArray
    from parvox.volume import store as vstore
    from parvox.volume.pyramid import downsample

    comm = MPI.COMM_WORLD
    tmp = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None)
    rng = np.random.default_rng(6)
    shape = (13, 10, 7)  # extents (4, 3, 5) divide none of it
    cases = [
        (rng.integers(-(2**40), 2**40, shape), "none", 0),  # int64 beyond float32's 2**24
        (rng.integers(0, 2**63, shape, dtype=np.uint64), "zstd", 0),
        (rng.random(shape), "zstd", 2),  # float64, compressed, two levels
        (rng.integers(0, 60000, shape).astype(np.uint16), "none", 2),
        (rng.integers(0, 256, (7, 5, 6, 3)).astype(np.uint8), "zstd", 1),  # RGB
    ]
    written: list[tuple[int, int, int]] = []
    real = vstore.StoreWriter.write_extent

    def spy(self, kz, ky, kx, block):
        if self.meta.level == 0:
            written.append((kz, ky, kx))
        real(self, kz, ky, kx, block)

    vstore.StoreWriter.write_extent = spy
    try:
        for i, (a, codec, levels) in enumerate(cases):
            dest = os.path.join(tmp, f"{i}.store")
            written.clear()
            d = DistArray.from_global(a, nblocks=3)  # blocks that cut y at 3 ranks
            io.write(d, dest, chunks=(4, 3, 5), codec=codec, levels=levels,
                     spacing=(2.0, 1.0, 0.5))
            # level 0: every extent written once, by the rank holding its row
            every = [e for mine in comm.allgather(written) for e in mine]
            assert sorted(every) == sorted(set(every)), "an extent written twice"
            nz, ny, nx = (-(-s // e) for s, e in zip(a.shape, (4, 3, 5), strict=False))
            assert len(every) == nz * ny * nx, len(every)
            rows = comm.allgather(sorted({kz for kz, _, _ in written}))
            assert sum(map(len, rows)) == nz, rows  # no row shared by two ranks
            r = io.open_reader(dest)
            assert r.levels == levels + 1 and r.dtype == a.dtype
            assert r.spacing == pytest.approx((2.0, 1.0, 0.5))
            r.close()
            back = io.read(dest, nblocks=4).allgather()
            assert back.dtype == a.dtype and back.shape == a.shape
            np.testing.assert_array_equal(back, a, err_msg=dest)
            for k in range(1, levels + 1):
                got = io.read(dest, level=k, nblocks=2).allgather()
                # float means are summed in another order than the reference's: 1 ulp
                np.testing.assert_allclose(got, downsample(a, k), rtol=1e-14,
                                           err_msg=f"{dest} {k}")
            assert vstore.VolumeStore(dest).verify() == []
    finally:
        vstore.StoreWriter.write_extent = real
    # bad input: named, nothing written
    d = DistArray.from_global(np.zeros((6, 5, 4), np.float32))
    bad = [
        (lambda: io.write(d.astype(np.complex64), os.path.join(tmp, "c.store")), "dtype"),
        (lambda: io.write(d, os.path.join(tmp, "l.store"), levels=9), "levels"),
        (lambda: io.write(d, os.path.join(tmp, "z.store"), codec="lzma"), "codec"),
        (lambda: io.write(d, os.path.join(tmp, "0.store")), "dest"),  # exists
    ]
    for call, param in bad:
        with pytest.raises(ValueError) as info:
            call()
        assert info.value.param == param, (param, info.value)
    # a write failing on the rank of the last row: every rank raises, nothing is left

    def failing(self, kz, ky, kx, block):
        if kz == 2:
            raise OSError("disk full")
        real(self, kz, ky, kx, block)

    vstore.StoreWriter.write_extent = failing
    try:
        with pytest.raises(Exception, match="disk full"):
            io.write(d, os.path.join(tmp, "f.store"), chunks=(2, 5, 4), codec="zstd")
    finally:
        vstore.StoreWriter.write_extent = real
    comm.Barrier()
    assert sorted(os.listdir(tmp)) == [f"{i}.store" for i in range(len(cases))]


def test_a_block_is_read_in_slabs_of_whole_chunk_rows():
    from parvox.io.distributed import _PIECE_BYTES, _pieces

    plane = 512 * 512 * 4
    bounds = (slice(3, 200), slice(0, 512), slice(0, 512))
    pieces = _pieces(bounds, (32, 64, 64), (300, 512, 512), np.dtype(np.float32))
    starts = [p[0].start for p, _ in pieces]
    assert starts[0] == 3 and all(z % 32 == 0 for z in starts[1:])  # chunk rows read once
    assert [p[0].stop for p, _ in pieces][-1] == 200
    assert all(p[1:] == bounds[1:] for p, _ in pieces)
    assert all((p[0].stop - p[0].start) * plane <= max(_PIECE_BYTES, 32 * plane)
               for p, _ in pieces)
    assert [(loc[0].start, loc[0].stop) for _, loc in pieces] == [
        (p[0].start - 3, p[0].stop - 3) for p, _ in pieces]
    # a memory-mapped file (one chunk): plane-aligned slabs; an empty block: one empty read
    flat = _pieces((slice(0, 100), slice(0, 512)), (100, 512), (100, 512), np.dtype(np.float64))
    assert len(flat) == 1
    assert _pieces((slice(4, 4), slice(2, 5)), (4, 4), (9, 9), np.dtype(np.uint8)) == [
        ((slice(4, 4), slice(2, 5)), (slice(0, 0), slice(0, 3)))]
