"""Every command takes every format: the workflow of issue 26 (OME-Zarr -> filter -> store ->
label -> OME-Zarr -> info), at 1 and 2 ranks, and the bad inputs refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

import parvox.cli as cli

from ._helpers import check_ok, refused, run_parvox


def _volume() -> np.ndarray:
    rng = np.random.default_rng(26)
    return rng.random((24, 20, 17)).astype(np.float32)


def _write_ome(path, vol, levels=0):
    from parvox import io
    from parvox.distarray import DistArray

    io.write(DistArray.from_global(vol), path, format="ome-zarr-0.5", levels=levels)


def _read(path, level=0):
    from parvox import io

    return io.read(path, level=level).allgather()


@pytest.mark.parametrize("ranks", [1, 2])
def test_filter_label_serve_workflow(tmp_path, ranks):
    vol = _volume()
    src, smooth, labels = tmp_path / "in.ome.zarr", tmp_path / "smooth.store", \
        tmp_path / "labels.ome.zarr"
    _write_ome(src, vol)
    check_ok(run_parvox("filter", str(src), str(smooth), "--op", "gaussian", "--sigma", "2",
                        "--levels", "2", "-n", str(ranks)))
    want = ndi.gaussian_filter(vol, 2, mode="reflect", truncate=4.0)
    got = _read(smooth)
    assert got.shape == vol.shape
    np.testing.assert_allclose(got, want.astype(got.dtype), rtol=1e-5, atol=1e-6)
    from parvox.io import open_reader

    assert open_reader(smooth).levels == 3
    t = float(np.quantile(got, 0.9))  # a few separate bright blobs
    check_ok(run_parvox("label", str(smooth), str(labels), "--threshold", repr(t),
                        "-n", str(ranks)))
    import zarr

    ref, n = ndi.label(got > t)
    root = zarr.open_group(str(labels), mode="r")
    np.testing.assert_array_equal(np.asarray(root["0"][...]), ref)
    assert n > 1
    info = run_parvox("info", str(smooth))
    check_ok(info)
    assert "24" in info.stdout and "20" in info.stdout and "17" in info.stdout


def test_level_reads_a_multiscale_input(tmp_path):
    vol = _volume()
    _write_ome(tmp_path / "in.ome.zarr", vol, levels=1)
    want = _read(tmp_path / "in.ome.zarr", level=1)
    code = cli.main(["filter", str(tmp_path / "in.ome.zarr"), str(tmp_path / "o.npy"),
                     "--op", "maximum", "--size", "1", "--level", "1"])
    assert code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), want)


def test_format_picks_the_output_format(tmp_path):
    vol = _volume()
    np.save(tmp_path / "v.npy", vol)
    out = tmp_path / "out"
    assert cli.main(["filter", str(tmp_path / "v.npy"), str(out), "--op", "maximum",
                     "--size", "1", "--format", "zarr-v2"]) == 0
    assert (out / ".zarray").is_file()
    np.testing.assert_array_equal(_read(out), vol)


def test_bad_inputs_are_refused_in_one_line(tmp_path, capsys):
    vol = _volume()
    src = tmp_path / "in.ome.zarr"
    _write_ome(src, vol, levels=1)
    before = sorted(p.name for p in tmp_path.iterdir())
    line = refused(["filter", tmp_path / "missing.npy", tmp_path / "o.npy", "--op", "median"],
                    capsys)
    assert "argument IN" in line and "missing.npy" in line
    line = refused(["filter", src, tmp_path / "o", "--op", "median", "--format", "nope"],
                    capsys)
    assert "argument --format" in line and "nope" in line
    line = refused(["label", src, tmp_path / "o.npy", "--level", "9"], capsys)
    assert "argument --level" in line and "[0, 1]" in line
    np.save(tmp_path / "img.npy", np.zeros((9, 8), np.uint8))
    line = refused(["filter", tmp_path / "img.npy", tmp_path / "o.png", "--op", "median",
                     "--levels", "2"], capsys)
    assert "argument --levels" in line
    line = refused(["filter", tmp_path / "img.npy", tmp_path / "o.npy", "--op", "median",
                     "--levels", "2"], capsys)
    assert "argument --levels" in line
    after = sorted(p.name for p in tmp_path.iterdir())
    assert after == sorted([*before, "img.npy"])
    np.save(tmp_path / "exists.npy", np.zeros(3))
    line = refused(["filter", tmp_path / "img.npy", tmp_path / "exists.npy", "--op", "median"],
                    capsys)
    assert "argument OUT" in line and "--overwrite" in line
    assert cli.main(["filter", str(tmp_path / "img.npy"), str(tmp_path / "exists.npy"),
                     "--op", "median", "--overwrite"]) == 0
    assert np.load(tmp_path / "exists.npy").shape == (9, 8)


def test_export_ingest_pyramid_take_every_format(tmp_path):
    from parvox.volume import VolumeStore

    vol = (_volume() * 1000).astype(np.uint16)
    src = tmp_path / "in.ome.zarr"
    _write_ome(src, vol, levels=1)
    level1 = _read(src, level=1)
    for fmt, name in [("ome-zarr-0.4", "a"), ("zarr", "b"), ("tiff-folder", "c"),
                      ("nifti", "d.nii"), ("npy", "e.npy"), ("precomputed", "f")]:
        assert cli.main(["export", str(src), str(tmp_path / name), "--format", fmt,
                         "--level", "1", "--no-progress"]) == 0, fmt
        np.testing.assert_array_equal(_read(tmp_path / name), level1)
    assert cli.main(["ingest", str(src), str(tmp_path / "s"), "--disks", "2", "--level", "1",
                     "--no-progress"]) == 0
    np.testing.assert_array_equal(VolumeStore(tmp_path / "s").read_volume(), level1)
    np.save(tmp_path / "v.npy", vol)
    assert cli.main(["pyramid", str(tmp_path / "v.npy"), str(tmp_path / "p.ome.zarr"),
                     "--levels", "2", "--no-progress"]) == 0
    from parvox.io import open_reader

    assert open_reader(tmp_path / "p.ome.zarr").levels == 3
    np.testing.assert_array_equal(_read(tmp_path / "p.ome.zarr"), vol)


@pytest.mark.parametrize("ranks", [1, 2])
def test_fft_reads_an_ome_zarr_level_and_writes_zarr(tmp_path, ranks):
    vol = _volume()
    _write_ome(tmp_path / "in.ome.zarr", vol, levels=1)
    level1 = _read(tmp_path / "in.ome.zarr", level=1)
    check_ok(run_parvox("fft", str(tmp_path / "in.ome.zarr"), str(tmp_path / "f.zarr"),
                        "--level", "1", "-n", str(ranks)))
    got = _read(tmp_path / "f.zarr")
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, np.fft.fftn(level1), rtol=1e-4, atol=1e-3)


def test_npy_tif_png_are_written_as_before(tmp_path):
    """.npy/.tif/.png keep their writers: a bool TIFF (which the registry's TIFF writer refuses)
    from a binary operation on an OME-Zarr input."""
    from parvox.io import read_image

    mask = _volume() > 0.5
    _write_ome(tmp_path / "m.ome.zarr", mask.astype(np.uint8))
    assert cli.main(["filter", str(tmp_path / "m.ome.zarr"), str(tmp_path / "o.tif"),
                     "--op", "binary_erosion"]) == 0
    got = read_image(tmp_path / "o.tif")
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, ndi.binary_erosion(mask))
