"""parvox.io: serial round trips and errors per format, and the distributed read/write."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from parvox.io import (
    check_writable,
    image_format,
    image_info,
    read_distributed,
    read_image,
    write_distributed,
    write_image,
)
from parvox.testing import mpi_test

RNG = np.random.default_rng(7)

ROUND_TRIPS = [
    ("a.npy", RNG.random((17, 23, 29)).astype(np.float32)),
    ("a.npy", RNG.integers(-5, 5, (9, 4)).astype(np.int64)),
    ("a.tif", RNG.random((97, 61)).astype(np.float32)),
    ("a.tiff", RNG.integers(0, 60000, (5, 7, 6)).astype(np.uint16)),
    ("a.png", RNG.integers(0, 256, (97, 61)).astype(np.uint8)),
    ("a.png", RNG.integers(0, 65536, (31, 17)).astype(np.uint16)),
    ("a.png", RNG.integers(0, 256, (13, 11, 3)).astype(np.uint8)),
    ("a.png", RNG.integers(0, 256, (13, 11, 4)).astype(np.uint8)),
    ("a.png", RNG.random((12, 10)) > 0.5),
]


@pytest.mark.parametrize(("name", "array"), ROUND_TRIPS, ids=lambda v: getattr(v, "dtype", v))
def test_round_trip_is_exact(tmp_path, name, array):
    path = tmp_path / name
    write_image(path, array)
    back = read_image(path)
    assert back.dtype == array.dtype
    assert np.array_equal(back, array)
    assert image_info(path) == (array.shape, array.dtype)


def test_png_holds_labels_as_uint16(tmp_path):
    labels = np.array([[0, 1, 2], [700, 0, 65535]], dtype=np.int32)
    write_image(tmp_path / "l.png", labels)
    back = read_image(tmp_path / "l.png")
    assert back.dtype == np.uint16
    assert np.array_equal(back, labels)


@pytest.mark.parametrize(
    ("array", "words"),
    [
        (np.zeros((4, 4), np.float32), "integer images only"),
        (np.array([[0, 70000]], np.int32), "do not fit a 16-bit PNG"),
        (np.array([[-1, 0]], np.int16), "do not fit a 16-bit PNG"),
        (np.zeros((2, 3, 4, 5), np.uint8), "needs a (y, x) grey"),
        (np.full((2, 2, 3), 300, np.uint16), "colour images are 8-bit"),
    ],
)
def test_png_refuses_what_it_cannot_hold(tmp_path, array, words):
    path = tmp_path / "x.png"
    with pytest.raises(ValueError, match=r"x\.png") as info:
        write_image(path, array)
    assert words in str(info.value)
    assert not path.exists()


def test_errors_name_the_path(tmp_path):
    with pytest.raises(ValueError, match=r"b\.jpg: unsupported extension '\.jpg'"):
        image_format(tmp_path / "b.jpg")
    with pytest.raises(ValueError, match="noext: unsupported extension"):
        read_image(tmp_path / "noext")
    with pytest.raises(ValueError, match=r"missing\.npy: no such file"):
        read_image(tmp_path / "missing.npy")
    with pytest.raises(ValueError, match=r"missing\.tif: no such file"):
        image_info(tmp_path / "missing.tif")
    with pytest.raises(ValueError, match="does not exist"):
        check_writable(tmp_path / "nodir" / "x.npy")
    for name in ("bad.npy", "bad.tif", "bad.png"):
        (tmp_path / name).write_bytes(b"this is not an image")
        with pytest.raises(ValueError, match=f"{name}: cannot read"):
            read_image(tmp_path / name)
        with pytest.raises(ValueError, match=f"{name}: cannot read"):
            image_info(tmp_path / name)


def test_png_extension_with_other_content_is_refused(tmp_path):
    import tifffile

    tifffile.imwrite(tmp_path / "t.tif", np.zeros((3, 3), np.uint8))
    os.rename(tmp_path / "t.tif", tmp_path / "t.png")
    with pytest.raises(ValueError, match=r"t\.png: cannot read png data"):
        read_image(tmp_path / "t.png")


# ---------------------------------------------------------------- distributed, 1-4 ranks
def _shared_dir() -> str:
    from mpi4py import MPI

    c = MPI.COMM_WORLD
    return c.bcast(tempfile.mkdtemp(prefix="parvox-io-") if c.Get_rank() == 0 else None)


@mpi_test(ranks=(1, 2, 3, 4), timeout=90)
def test_distributed_read_write_every_format():
    from mpi4py import MPI

    c = MPI.COMM_WORLD
    tmp = _shared_dir()
    rng = np.random.default_rng(3)
    cases = {
        "v.npy": rng.random((17, 23, 29)).astype(np.float32),
        "i.tif": rng.integers(0, 1000, (97, 61)).astype(np.uint16),
        "i.png": rng.integers(0, 256, (97, 61)).astype(np.uint8),
    }
    for name, array in cases.items():
        path = os.path.join(tmp, name)
        if c.Get_rank() == 0:
            write_image(path, array)
        c.Barrier()
        for layout in ({}, {"axis": 0}, {"nblocks": 2 * c.Get_size() + 1}):
            d = read_distributed(path, **layout)
            assert d.shape == array.shape and d.dtype == array.dtype
            assert np.array_equal(d.allgather(), array)
            out = os.path.join(tmp, "out_" + name)
            write_distributed(d, out)
            assert np.array_equal(read_image(out), array)  # every rank reads it back
            c.Barrier()


@mpi_test(ranks=(1, 3), timeout=60)
def test_distributed_errors_reach_every_rank():
    from parvox.errors import AllRanksError, AllRanksValueError

    tmp = _shared_dir()
    with pytest.raises(AllRanksValueError, match=r"missing\.png: no such file"):
        read_distributed(os.path.join(tmp, "missing.png"))
    with pytest.raises(AllRanksValueError, match=r"missing\.npy: no such file") as info:
        read_distributed(os.path.join(tmp, "missing.npy"))
    assert isinstance(info.value, AllRanksError) and info.value.rank == 0
    from parvox.distarray import DistArray

    d = DistArray.scatter(np.zeros((9, 5), np.float64))
    with pytest.raises(AllRanksValueError, match="integer images only"):
        write_distributed(d, os.path.join(tmp, "f.png"))
    with pytest.raises(AllRanksValueError, match="does not exist"):
        write_distributed(d, os.path.join(tmp, "nodir", "f.npy"))


# ------------------------------------------------------------------ publication


def _recording_fsync(monkeypatch):
    """Record the path behind every fd that os.fsync flushes."""
    synced = []
    real = os.fsync

    def record(fd):
        synced.append(os.path.realpath(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(os, "fsync", record)
    return synced


def test_atomic_write_publishes_only_complete_files(tmp_path, monkeypatch):
    from parvox.io import atomic_write

    synced = _recording_fsync(monkeypatch)
    target = tmp_path / "a.bin"
    with atomic_write(target) as fh:
        fh.write(b"first")
        fh.flush()
        assert not target.exists()  # nothing under the final name while writing
        temp = os.path.realpath(fh.name)
        assert os.path.dirname(temp) == str(tmp_path.resolve())  # beside it: rename is atomic
    assert target.read_bytes() == b"first"
    assert os.listdir(tmp_path) == ["a.bin"]
    # the file's data, then the directory entry, reached the disk
    assert synced == [temp, str(tmp_path.resolve())]
    # an existing file is replaced by the rename: a reader holding the old one keeps it whole
    with open(target, "rb") as old, atomic_write(target, "w") as fh:
        fh.write("second, longer")
        assert target.read_bytes() == b"first"
    assert old.closed and target.read_text() == "second, longer"
    assert os.listdir(tmp_path) == ["a.bin"]


def test_atomic_write_leaves_nothing_when_the_body_raises(tmp_path):
    from parvox.io import atomic_write

    target = tmp_path / "a.txt"
    target.write_text("old")
    with pytest.raises(KeyError), atomic_write(target, "w") as fh:
        fh.write("half")
        raise KeyError("boom")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["a.txt"]
    with pytest.raises(ValueError, match="mode"), atomic_write(target, "a"):
        pass


def test_atomic_path_publishes_files_and_directories(tmp_path, monkeypatch):
    from parvox.io import atomic_path

    with atomic_path(tmp_path / "scan.nii.gz") as tmp:
        assert tmp.name.endswith(".nii.gz")  # writers that pick a format by extension work
        tmp.write_bytes(b"x")
    assert (tmp_path / "scan.nii.gz").read_bytes() == b"x"
    synced = _recording_fsync(monkeypatch)
    for value in ("one", "two"):  # the second replaces the first directory whole
        with atomic_path(tmp_path / "store") as tmp:
            (tmp / "sub").mkdir(parents=True)
            (tmp / "sub" / "f").write_text(value)
    assert (tmp_path / "store" / "sub" / "f").read_text() == "two"
    assert sorted(os.listdir(tmp_path)) == ["scan.nii.gz", "store"]
    # every file and folder of the tree, then the parent directory, is flushed
    names = [os.path.basename(p) for p in synced[-4:]]
    assert names[0] == "f" and names[1] == "sub" and synced[-1] == str(tmp_path.resolve())
    with pytest.raises(OSError), atomic_path(tmp_path / "store") as tmp:
        tmp.mkdir()
        (tmp / "f").write_text("half")
        raise OSError("disk full")
    assert sorted(os.listdir(tmp_path)) == ["scan.nii.gz", "store"]
