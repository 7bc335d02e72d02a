"""Ingest from every source kind, atomicity; parallel ingest at 1-4 ranks."""

import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from parvox.errors import RankFailure
from parvox.testing import mpi_test
from parvox.volume import StoreError, VolumeStore, ingest, ingest_array
from parvox.volume.store import MANIFEST, StoreWriter


def _vol(shape=(23, 19, 17), seed=3):
    return np.random.default_rng(seed).integers(0, 60000, size=shape).astype(np.uint16)


def test_ingest_npy_tiff_file_tiff_folder(tmp_path):
    import tifffile

    vol = _vol()
    np.save(tmp_path / "v.npy", vol)
    tifffile.imwrite(tmp_path / "v.tif", vol)
    folder = tmp_path / "slices"
    folder.mkdir()
    for z in range(vol.shape[0]):
        tifffile.imwrite(folder / f"s{z:04d}.tif", vol[z])
    for i, src in enumerate([tmp_path / "v.npy", tmp_path / "v.tif", folder]):
        path = ingest(src, tmp_path / f"s{i}", ndisks=2, extent=(5, 7, 6), progress=False)
        np.testing.assert_array_equal(VolumeStore(path).read_volume(), vol)
    rgb = np.random.default_rng(1).integers(0, 256, size=(6, 9, 10, 3), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "rgb.tif", rgb, photometric="rgb")
    path = ingest(tmp_path / "rgb.tif", tmp_path / "srgb", extent=(5, 7, 6), progress=False)
    assert VolumeStore(path).meta.channels == 3
    np.testing.assert_array_equal(VolumeStore(path).read_volume(), rgb)


def test_ingest_nifti_and_zarr(tmp_path):
    import nibabel
    import zarr

    vol = _vol().astype(np.int16)  # kept as int16 (issue 26: no conversion to float32)
    img = nibabel.Nifti1Image(vol.transpose(2, 1, 0), np.diag([0.5, 0.8, 2.0, 1.0]))
    img.header.set_zooms((0.5, 0.8, 2.0))
    nibabel.save(img, tmp_path / "v.nii.gz")
    path = ingest(tmp_path / "v.nii.gz", tmp_path / "n", extent=(5, 7, 6), progress=False)
    store = VolumeStore(path)
    assert store.meta.spacing == (2.0, 0.8, 0.5) and store.meta.dtype == "int16"
    np.testing.assert_array_equal(store.read_volume(), vol)
    z = zarr.create_array(str(tmp_path / "v.zarr"), shape=vol.shape, chunks=(5, 7, 6),
                          dtype="uint16")
    z[:] = vol.astype(np.uint16)
    path = ingest(tmp_path / "v.zarr", tmp_path / "z", ndisks=3, extent=(4, 4, 4),
                  progress=False)
    np.testing.assert_array_equal(VolumeStore(path).read_volume(), vol.astype(np.uint16))


def test_ingest_bad_input(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        ingest(tmp_path / "nope.npy", tmp_path / "s", progress=False)
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(ValueError, match="unknown kind"):
        ingest(tmp_path / "x.txt", tmp_path / "s", progress=False)
    with pytest.raises(ValueError, match="shape"):
        ingest_array(np.zeros((3, 4)), tmp_path / "s", progress=False)
    with pytest.raises(ValueError, match="RGB"):
        ingest_array(np.zeros((3, 4, 5, 3), np.uint16), tmp_path / "s", progress=False)
    ingest_array(np.zeros((3, 4, 5)), tmp_path / "s", progress=False)
    with pytest.raises(ValueError, match="already exists"):
        ingest_array(np.zeros((3, 4, 5)), tmp_path / "s", progress=False)
    p = ingest_array(np.ones((3, 4, 5), np.uint8), tmp_path / "s", overwrite=True, progress=False)
    assert VolumeStore(p).read_volume().min() == 1


def test_failed_ingest_leaves_nothing(tmp_path, monkeypatch):
    calls = []
    real = StoreWriter.write_extent

    def failing(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk full (simulated)")
        return real(self, *args)

    monkeypatch.setattr(StoreWriter, "write_extent", failing)
    with pytest.raises(RankFailure, match="OSError: disk full") as info:  # on every rank
        ingest_array(_vol(), tmp_path / "s", ndisks=2, extent=(5, 7, 6), progress=False)
    assert isinstance(info.value.__cause__, OSError)
    assert list(tmp_path.iterdir()) == []


def test_killed_ingest_never_opens_as_valid(tmp_path):
    script = textwrap.dedent(
        f"""
        import time, numpy as np
        from parvox.volume import ingest, ArraySource
        class Slow(ArraySource):
            def read_slab(self, z0, z1):
                open({str(tmp_path / "started")!r}, "w").close()
                time.sleep(0.5)
                return super().read_slab(z0, z1)
        ingest(Slow(np.ones((40, 8, 8), np.uint8)), {str(tmp_path / "s")!r}, ndisks=2,
               extent=(4, 4, 4), progress=False)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    t0 = time.monotonic()
    while not (tmp_path / "started").exists() and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "s").exists()
    with pytest.raises(StoreError):
        VolumeStore(tmp_path / "s")
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".s.tmp")]
    assert leftovers and not (leftovers[0] / MANIFEST).exists()
    with pytest.raises(StoreError):
        VolumeStore(leftovers[0])


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_parallel_ingest_each_rank_writes_its_disks():
    import shutil
    import tempfile
    from pathlib import Path

    from mpi4py import MPI

    from parvox.volume import VolumeStore, ingest, parse_disk_map

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    root = Path(comm.bcast(tempfile.mkdtemp() if rank == 0 else None))
    vol = np.random.default_rng(7).random((37, 45, 53), dtype=np.float32)
    if rank == 0:
        np.save(root / "v.npy", vol)
    comm.Barrier()
    path = ingest(root / "v.npy", root / "s", ndisks=5, extent=(5, 7, 6), progress=rank == 0)
    store = VolumeStore(path)
    np.testing.assert_array_equal(store.read_volume(), vol)
    # a folder of TIFF slices, each rank reading the slabs it needs
    if rank == 0:
        import tifffile

        (root / "tif").mkdir()
        for z in range(vol.shape[0]):
            tifffile.imwrite(root / "tif" / f"{z:03d}.tif", vol[z])
    comm.Barrier()
    path = ingest(root / "tif", root / "u", ndisks=4, extent=(17, 7, 32), progress=False)
    np.testing.assert_array_equal(VolumeStore(path).read_volume(), vol)
    # an explicit map: the last rank writes every disk
    dmap = parse_disk_map({str(size - 1): [0, 1, 2]}, ndisks=3, nranks=size)
    path = ingest(vol, root / "t", ndisks=3, extent=(17, 32, 32), disk_map=dmap,
                  progress=False)
    assert VolumeStore(path).verify() == []
    # compressed: the ranks' extents placed one after another in each shared file (rows
    # shared out), or each disk written by its one rank (a map); levels from the source
    from parvox.volume.pyramid import downsample

    for name, kw in (("c", {}), ("d", {"disk_map": dmap})):
        path = ingest(root / "v.npy", root / name, ndisks=3, extent=(5, 7, 6), codec="zstd",
                      levels=1, progress=False, **kw)
        store = VolumeStore(path)
        np.testing.assert_array_equal(store.read_volume(), vol)
        assert store.verify() == []
        np.testing.assert_allclose(VolumeStore(path, level=1).read_volume(), downsample(vol, 1),
                                   rtol=1e-6)
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(root)
