"""Neuroglancer precomputed on disk: the format's rules (names, info, encodings), and a store's
static export at 1 and 3 ranks read back by tensorstore (``file://``) and parvox's reader."""

from __future__ import annotations

import json

import numpy as np
import pytest

from parvox.errors import ParameterError
from parvox.io.neuroglancer import (
    ChunkNotFound,
    data_type,
    decode_chunk,
    encode_chunk,
    parse_chunk_name,
    precomputed_info,
    resolution_nm,
)
from parvox.server.precomputed import RangeNotSatisfiable, byte_range
from parvox.testing import mpi_test
from parvox.volume.manifest import new_meta


def test_chunk_names_on_the_grid_parse_and_others_are_refused():
    shape, chunk = (13, 20, 29), (4, 8, 16)  # (z, y, x)
    assert parse_chunk_name("16-29_16-20_12-13", shape, chunk) == ((12, 16, 16), (13, 20, 29))
    assert parse_chunk_name("0-16_0-8_0-4", shape, chunk) == ((0, 0, 0), (4, 8, 16))
    for name in ("16-29_16-20_12-14", "8-24_0-8_0-4", "0-16_0-8_0-3", "0-16_0-8", "a-b_0-8_0-4",
                 "0-16_0-8_0-4_0-1", "-16-0_0-8_0-4", "16-32_0-8_0-4"):
        with pytest.raises(ParameterError) as info:
            parse_chunk_name(name, shape, chunk)
        assert info.value.param == "chunk" and not isinstance(info.value, ChunkNotFound), name
    for name in ("32-48_0-8_0-4", "0-16_24-32_0-4", "0-16_0-8_16-20"):
        with pytest.raises(ChunkNotFound):
            parse_chunk_name(name, shape, chunk)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "<u2", ">u2", "int16", ">i4", "uint32",
                                   "uint64", ">f4"])
def test_raw_chunks_are_little_endian_x_fastest_channels_slowest(dtype):
    rng = np.random.default_rng(1)
    a = rng.integers(0, 100, (3, 5, 7)).astype(dtype)
    body = encode_chunk(a, 1)
    ref = np.asarray(a, dtype=np.dtype(dtype).newbyteorder("<")).transpose(2, 1, 0)
    assert body == ref.tobytes(order="F")
    np.testing.assert_array_equal(decode_chunk(body, (3, 5, 7), 1, dtype), a)
    rgb = rng.integers(0, 256, (2, 3, 4, 3)).astype(np.uint8)
    assert encode_chunk(rgb, 3) == rgb.transpose(2, 1, 0, 3).tobytes(order="F")
    with pytest.raises(ValueError, match="bytes"):
        decode_chunk(body[:-1], (3, 5, 7), 1, dtype)


def test_jpeg_chunks_stack_the_rows_and_stay_close():
    z, y, x = np.meshgrid(np.arange(4), np.arange(16), np.arange(16), indexing="ij")
    a = (40 + 3 * x + 2 * y + 10 * z).astype(np.uint8)
    for data, c in ((a, 1), (np.stack([a, 255 - a, a // 2], axis=-1), 3)):
        back = decode_chunk(encode_chunk(data, c, "jpeg", 95), (4, 16, 16), c, np.uint8, "jpeg")
        assert back.shape == data.shape
        assert np.abs(back.astype(int) - data).mean() < 2.0


def test_info_types_scales_and_refusals():
    m = new_meta((37, 45, 53), "uint32", spacing=(2.0, 0.5, 0.3), extent=(8, 16, 16), levels=2,
                 content="labels")
    info = precomputed_info(m)
    assert info["type"] == "segmentation" and info["num_channels"] == 1
    assert [s["size"] for s in info["scales"]] == [[53, 45, 37], [27, 23, 19], [14, 12, 10]]
    assert info["scales"][0]["resolution"] == [300000, 500000, 2000000] == resolution_nm(
        (2.0, 0.5, 0.3))
    assert info["scales"][2]["resolution"] == [1200000, 2000000, 8000000]
    assert {s["key"] for s in info["scales"]}.__len__() == 3
    rgb = precomputed_info(new_meta((5, 6, 7), "uint8", channels=3), "jpeg")
    assert rgb["num_channels"] == 3 and rgb["scales"][0]["encoding"] == "jpeg"
    for dtype in ("int64", "float64"):
        with pytest.raises(ParameterError) as err:
            precomputed_info(new_meta((5, 6, 7), dtype))
        assert err.value.param == "dtype"
    with pytest.raises(ParameterError) as err:
        precomputed_info(new_meta((5, 6, 7), "uint16"), "jpeg")
    assert err.value.param == "encoding"
    assert data_type(np.dtype(">u2")) == "uint16"


def test_byte_ranges():
    assert byte_range("bytes=0-0", 5) == (0, 1)
    assert byte_range("bytes=-9", 5) == (0, 5)
    assert byte_range("items=0-1", 5) is None
    for bad in ("bytes=5-", "bytes=3-2", "bytes=-0", "bytes=-", "bytes=a-1"):
        with pytest.raises(RangeNotSatisfiable):
            byte_range(bad, 5)
    with pytest.raises(RangeNotSatisfiable):
        byte_range("bytes=0-", 0)


@mpi_test(ranks=(1, 3), timeout=240)
def test_store_export_is_read_back_by_tensorstore_and_parvox():
    import os
    import tempfile
    from pathlib import Path

    import tensorstore as ts
    from mpi4py import MPI

    from parvox.errors import AllRanksValueError
    from parvox.io import open_reader
    from parvox.io.formats.precomputed import PrecomputedReader, export_store
    from parvox.volume import ingest_array
    from parvox.volume.pyramid import downsample

    comm = MPI.COMM_WORLD
    tmp = Path(comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None))
    rng = np.random.default_rng(4)
    grey = rng.integers(0, 65535, (11, 14, 19)).astype(np.uint16)
    rgb = rng.integers(0, 256, (7, 9, 10, 3)).astype(np.uint8)
    labels = rng.integers(0, 5, (9, 10, 13)).astype(np.int32) * 1000
    cases = [("grey", grey, {"extent": (4, 8, 8), "ndisks": 3, "levels": 2,
                             "spacing": (1.5, 0.5, 0.5)}),
             ("rgb", rgb, {"extent": (4, 4, 8), "ndisks": 2, "levels": 1}),
             ("labels", labels, {"extent": (8, 4, 8), "ndisks": 5, "levels": 1, "labels": True})]
    for name, vol, kw in cases:
        store = ingest_array(vol, tmp / f"{name}.store", progress=False, comm=comm, **kw)
        out = export_store(store, tmp / f"{name}.ng", comm=comm)
        # every rank lists the directory between two barriers: without the second, a rank
        # done first starts the next ingest, whose temporary directory the others then see
        comm.Barrier()
        left = [p for p in os.listdir(tmp) if ".tmp-" in p]
        comm.Barrier()
        assert not left, left  # published, nothing left
        r = PrecomputedReader(out)
        assert r.levels == kw["levels"] + 1
        assert r.info["type"] == ("segmentation" if name == "labels" else "image")
        assert open_reader(out).shape == vol.shape  # recognised as precomputed
        for k in range(r.levels):
            want = downsample(vol, k, labels=name == "labels")
            t = ts.open({"driver": "neuroglancer_precomputed", "kvstore": f"file://{out}/",
                         "scale_index": k}).result()
            z, y, x = want.shape[:3]
            for box in ((slice(0, z), slice(0, y), slice(0, x)),
                        (slice(z // 3, z), slice(1, y - 1), slice(x // 4, x - 1))):
                ref = want[box]
                got = np.asarray(t[box[2], box[1], box[0]].read().result())
                got = got.transpose(2, 1, 0, 3)
                np.testing.assert_array_equal(got if vol.ndim == 4 else got[..., 0], ref,
                                              err_msg=f"{name} level {k}")
                np.testing.assert_array_equal(r.read_box(box, k), ref)
    # refusals reach every rank, naming the argument, and leave nothing behind
    f64 = ingest_array(np.zeros((3, 4, 5)), tmp / "f64.store", progress=False, comm=comm)
    for call, param in ((lambda: export_store(f64, tmp / "f64.ng", comm=comm), "dtype"),
                        (lambda: export_store(tmp / "grey.store", tmp / "grey.ng", comm=comm),
                         "out"),
                        (lambda: export_store(tmp / "grey.store", tmp / "x.ng", levels=3,
                                              comm=comm), "levels")):
        with pytest.raises(AllRanksValueError) as err:
            call()
        assert err.value.param == param
    assert not (tmp / "f64.ng").exists() and not (tmp / "x.ng").exists()
    assert not [p for p in os.listdir(tmp) if ".tmp-" in p]


def test_parvox_export_writes_a_store_as_precomputed_with_its_levels(tmp_path, capsys):
    from mpi4py import MPI

    from parvox import cli
    from parvox.io.formats.precomputed import PrecomputedReader
    from parvox.volume import ingest_array
    from parvox.volume.pyramid import downsample

    vol = np.random.default_rng(2).integers(0, 255, (9, 10, 11)).astype(np.uint8)
    store = ingest_array(vol, tmp_path / "s", extent=(4, 4, 8), ndisks=2, levels=2,
                         progress=False, comm=MPI.COMM_SELF)
    assert cli.main(["export", str(store), str(tmp_path / "ng"), "--format", "precomputed",
                     "--levels", "1", "--no-progress"]) == 0
    assert "Neuroglancer precomputed, levels 0..1" in capsys.readouterr().out
    r = PrecomputedReader(tmp_path / "ng")
    assert r.levels == 2 and r.chunks == (4, 4, 8)
    np.testing.assert_array_equal(r.read_box((slice(0, 5), slice(0, 5), slice(0, 6)), 1),
                                  downsample(vol, 1))
    f64 = ingest_array(np.zeros((3, 4, 5)), tmp_path / "f", progress=False, comm=MPI.COMM_SELF)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["export", str(f64), str(tmp_path / "f.ng"), "--format", "precomputed"])
    assert exit_.value.code == 2 and not (tmp_path / "f.ng").exists()
    assert "argument --format: dtype: float64 has no Neuroglancer" in capsys.readouterr().err


def test_labels_are_marked_and_their_levels_subsampled_in_every_levelled_format(tmp_path, capsys):
    """``io.write(..., labels=True)``: a store is marked as labels, a precomputed volume is a
    segmentation, and the levels of every format pick ids (``downsample(labels=True)``, the
    serial reference) instead of averaging them; ``parvox label`` and ``parvox ingest
    --labels`` write such stores; non-integer ids are refused naming ``labels``."""
    from mpi4py import MPI

    from parvox import cli, io
    from parvox.distarray import DistArray
    from parvox.errors import AllRanksValueError
    from parvox.volume import VolumeStore
    from parvox.volume.pyramid import downsample

    ids = np.random.default_rng(4).integers(2**33, 2**33 + 5, (9, 10, 11)).astype(np.int64)
    ids[::3] = 0
    d = DistArray.from_global(ids, comm=MPI.COMM_SELF)
    for name, fmt in [("l.store", None), ("l.ome.zarr", None), ("l.ng", "precomputed")]:
        if fmt == "precomputed":
            d32 = DistArray.from_global(ids.astype(np.uint32), comm=MPI.COMM_SELF)
            io.write(d32, tmp_path / name, format=fmt, levels=2, labels=True, chunks=4)
            ref = ids.astype(np.uint32)
        else:
            io.write(d, tmp_path / name, levels=2, labels=True, chunks=4)
            ref = ids
        for k in range(3):
            got = io.read(tmp_path / name, level=k, comm=MPI.COMM_SELF).allgather()
            np.testing.assert_array_equal(got, downsample(ref, k, labels=True), err_msg=name)
    assert VolumeStore(tmp_path / "l.store").meta.content == "labels"
    info = json.loads((tmp_path / "l.ng" / "info").read_text())
    assert info["type"] == "segmentation"
    for array, labels in [(d.astype(np.float32), True), (d, 1)]:
        with pytest.raises(AllRanksValueError) as err:
            io.write(array, tmp_path / "bad.store", labels=labels)
        assert err.value.param == "labels"
    assert not (tmp_path / "bad.store").exists()
    # the CLI: label marks its store, ingest --labels marks its, a float SRC is refused
    np.save(tmp_path / "mask.npy", (ids > 0).astype(np.uint8))
    assert cli.main(["label", str(tmp_path / "mask.npy"), str(tmp_path / "lab.store")]) == 0
    assert VolumeStore(tmp_path / "lab.store").meta.content == "labels"
    np.save(tmp_path / "ids.npy", ids.astype(np.uint32))
    assert cli.main(["ingest", str(tmp_path / "ids.npy"), str(tmp_path / "ing.store"),
                     "--disks", "2", "--labels", "--no-progress"]) == 0
    assert VolumeStore(tmp_path / "ing.store").meta.content == "labels"
    np.save(tmp_path / "f.npy", ids.astype(np.float32))
    with pytest.raises(SystemExit) as exit_:
        cli.main(["ingest", str(tmp_path / "f.npy"), str(tmp_path / "f.store"), "--disks", "1",
                  "--labels"])
    assert exit_.value.code == 2 and not (tmp_path / "f.store").exists()
    assert "--labels" in capsys.readouterr().err
