"""The ingest, info, verify, slice and phantom subcommands."""

import json

import numpy as np
import pytest

import parvox.cli as cli
from parvox.testing import mpi_test


def _run(argv, capsys):
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out


def _usage_error(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert info.value.code == 2
    return err


def test_phantom_ingest_info_verify_slice(tmp_path, capsys):
    from parvox.slicing import Plane, reference_slice
    from parvox.volume import VolumeStore, phantom

    npy = tmp_path / "p.npy"
    assert _run(["phantom", npy, "--shape", "37,45,53"], capsys)[0] == 0
    vol = np.load(npy)
    np.testing.assert_array_equal(vol, phantom((37, 45, 53)))
    store = tmp_path / "s"
    code, out = _run(["ingest", npy, store, "--disks", "3", "--extent", "5,7,6",
                      "--spacing", "2,1,1", "--no-progress"], capsys)
    assert code == 0 and "3 disks" in out
    code, out = _run(["info", store], capsys)
    assert code == 0 and "(37, 45, 53)" in out and "uint8" in out and "(5, 7, 6)" in out
    desc = json.loads(_run(["info", store, "--json"], capsys)[1])
    assert desc["disks"] == 3 and desc["size_on_disk"] == VolumeStore(store).size_on_disk()
    assert desc["spacing_mm"] == [2.0, 1.0, 1.0]
    code, out = _run(["verify", store], capsys)
    assert code == 0 and f"all {VolumeStore(store).layout.count} extents OK" in out
    # a float slice, u/v form, zoom 2
    args = ["slice", store, "--center", "18,22,26", "--u", "0,1,1", "--v", "1,0,0.2",
            "--size", "20,30", "--zoom", "2", "--step", "0.8"]
    assert _run([*args, "-o", tmp_path / "a.npy"], capsys)[0] == 0
    plane = Plane((18, 22, 26), (0, 1, 1), (1, 0, 0.2), (20, 30), 0.8, 2, (2.0, 1.0, 1.0))
    got = np.load(tmp_path / "a.npy")
    np.testing.assert_allclose(got, reference_slice(vol, plane), rtol=1e-5, atol=1e-3)
    assert _run([*args, "-o", tmp_path / "a.png"], capsys)[0] == 0
    from PIL import Image

    png = np.asarray(Image.open(tmp_path / "a.png"))
    assert png.shape == (20, 30) and np.abs(png.astype(int) - np.rint(got)).max() <= 1
    # normal form
    assert _run(["slice", store, "--center", "18,22,26", "--normal", "1,1,1", "--size", "16,16",
                 "-o", tmp_path / "n.npy"], capsys)[0] == 0
    plane = Plane.from_normal((18, 22, 26), (1, 1, 1), (16, 16), spacing=(2.0, 1.0, 1.0))
    np.testing.assert_allclose(np.load(tmp_path / "n.npy"), reference_slice(vol, plane),
                               rtol=1e-5, atol=1e-3)


def test_verify_names_bad_extents(tmp_path, capsys):
    from parvox.volume import VolumeStore

    store = tmp_path / "s"
    assert _run(["phantom", store, "--shape", "20,21,22", "--disks", "2", "--extent", "5,7,6",
                 "--no-progress"], capsys)[0] == 0
    s = VolumeStore(store)
    for key in [(1, 1, 1), (3, 2, 3)]:
        disk, offset = s.locate(*key)
        with open(s.file_path(disk), "r+b") as fh:
            fh.seek(offset + 5)
            fh.write(b"\x01\x02\x03")
    code, out = _run(["verify", store], capsys)
    assert code == 1
    assert "extent (1, 1, 1)" in out and "extent (3, 2, 3)" in out and "2 of 48" in out
    # the same through a configuration map (TOML): one rank serves both disks
    cfg = tmp_path / "map.toml"
    cfg.write_text("[ranks]\n0 = [0, 1]\n")
    code, out = _run(["verify", store, "--map", cfg], capsys)
    assert code == 1 and "2 of 48" in out
    args = ["slice", store, "--center", "1,2,3", "--u", "0,0,1", "--v", "0,1,0", "--size",
            "3,3", "--map", cfg, "-o", tmp_path / "m.npy"]
    assert _run(args, capsys)[0] == 0
    cfg.write_text("[ranks]\n0 = [0]\n")  # disk 1 unserved: a usage error, not a failed job
    assert "serves no rank for disks [1]" in _usage_error(args, capsys)
    assert "--map" in _usage_error(["verify", store, "--map", tmp_path / "none.toml"], capsys)


def test_rgb_phantom_store_and_png(tmp_path, capsys):
    store = tmp_path / "rgb"
    assert _run(["phantom", store, "--shape", "30,40,50", "--rgb", "--disks", "2",
                 "--no-progress"], capsys)[0] == 0
    assert _run(["slice", store, "--center", "15,20,25", "--normal", "0,-1,0", "--size",
                 "30,50", "-o", tmp_path / "c.png"], capsys)[0] == 0
    from PIL import Image

    img = Image.open(tmp_path / "c.png")
    assert img.mode == "RGB" and img.size == (50, 30)


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--zoom", "0"], "--zoom"),
        (["--size", "0,5"], "--size"),
        (["--size", "5"], "--size"),
        (["--normal", "1,0,0"], "--normal"),
        (["--center", "1,2"], "--center"),
        (["--center", "1,nan,2"], "--center"),
        (["--step", "-1"], "--step"),
        (["-o", "x.jpg"], "-o"),
    ],
)
def test_slice_bad_input(tmp_path, capsys, extra, flag):
    args = {"--center": "1,2,3", "--size": "4,4", "-o": str(tmp_path / "x.npy")}
    base = ["slice", str(tmp_path), "--u", "0,0,1", "--v", "0,1,0"]
    for k, v in args.items():
        if k not in extra:
            base += [k, v]
    err = _usage_error(base + extra, capsys)
    assert flag in err and err.count("\n") == 1


def test_other_bad_input(tmp_path, capsys):
    assert "--disks" in _usage_error(["ingest", tmp_path, tmp_path / "s", "--disks", "0"], capsys)
    err = _usage_error(["ingest", tmp_path / "no.npy", tmp_path / "s", "--disks", "1"], capsys)
    assert "SRC" in err
    err = _usage_error(["ingest", tmp_path, tmp_path / "s", "--disks", "2", "--extent", "1,2"],
                       capsys)
    assert "--extent" in err
    assert "--shape" in _usage_error(["phantom", tmp_path / "p.npy", "--shape", "0,1,1"], capsys)
    assert "STORE" in _usage_error(["info", tmp_path / "nope"], capsys)
    code, out = _run(["info", tmp_path], capsys)
    assert code == 1 and "not a parvox volume store" in out


def test_levels_codec_pyramid_export(tmp_path, capsys):
    import zarr

    from parvox.volume import VolumeStore
    from parvox.volume.pyramid import downsample

    store = tmp_path / "s"
    code, out = _run(["phantom", store, "--shape", "33,20,27", "--disks", "2", "--extent",
                      "5,7,6", "--codec", "zstd", "--levels", "2", "--no-progress"], capsys)
    assert code == 0
    vol = VolumeStore(store).read_volume()
    desc = json.loads(_run(["info", store, "--json"], capsys)[1])
    assert desc["codec"] == "zstd" and desc["levels"] == [[17, 10, 14], [9, 5, 7]]
    assert "pyramid      2 levels: 17x10x14, 9x5x7" in _run(["info", store], capsys)[1]
    code, out = _run(["verify", store], capsys)
    assert code == 0 and f"all {7 * 3 * 5 + 4 * 2 * 3 + 2 * 1 * 2} extents OK" in out
    code, out = _run(["pyramid", store, "--levels", "3", "--no-progress"], capsys)
    assert code == 0 and "3 levels above 33x20x27" in out
    np.testing.assert_array_equal(VolumeStore(store, level=3).read_volume(), downsample(vol, 3))
    omz = tmp_path / "s.ome.zarr"
    code, out = _run(["export", store, omz, "--levels", "1", "--no-progress"], capsys)
    assert code == 0 and "levels 0..1" in out
    np.testing.assert_array_equal(zarr.open_array(str(omz / "1"), mode="r")[:], downsample(vol, 1))
    code, out = _run(["ingest", omz, tmp_path / "b", "--disks", "3", "--levels", "1",
                      "--codec", "blosc2", "--no-progress"], capsys)
    assert code == 0 and "codec blosc2, 1 pyramid level" in out
    np.testing.assert_array_equal(VolumeStore(tmp_path / "b").read_volume(), vol)
    # bad input names the argument
    for argv, flag in [
        (["pyramid", store, "--levels", "-1"], "--levels"),
        (["pyramid", store, "--levels", "7"], "--levels"),
        (["pyramid", tmp_path / "nope", "--levels", "1"], "STORE"),
        (["pyramid", omz, "--levels", "1"], "STORE"),
        (["export", store, tmp_path / "x.ome.zarr", "--levels", "4"], "--levels"),
        (["export", store, omz], "OUT"),
        (["export", store, tmp_path / "x.foo"], "OUT"),
        (["phantom", tmp_path / "q", "--shape", "4,4,4", "--levels", "3"], "--levels"),
        (["phantom", tmp_path / "q", "--shape", "4,4,4", "--codec", "lz4"], "--codec"),
        (["phantom", tmp_path / "q.npy", "--shape", "4,4,4", "--levels", "1"], "--levels"),
        (["ingest", omz, tmp_path / "c", "--disks", "1", "--levels", "-2"], "--levels"),
        (["ingest", omz, tmp_path / "c", "--disks", "1", "--levels", "7"], "--levels"),
    ]:
        err = _usage_error(argv, capsys)
        assert flag in err and err.count("\n") == 1, (argv, err)


def test_dash_n_launches_mpiexec(tmp_path):
    from tests.cli._helpers import check_ok, ranks_that_ran, run_parvox

    store = tmp_path / "s"
    for n, argv in ((2, ["phantom", store, "--shape", "20,21,22", "--disks", "3",
                         "--no-progress"]), (3, ["verify", store])):
        log = tmp_path / f"log{n}"
        log.mkdir()
        proc = run_parvox(*map(str, argv), "-n", str(n), ranks_log=log)
        check_ok(proc)
        assert ranks_that_ran(log) == [(r, n) for r in range(n)]
    assert "all 2 extents OK" in proc.stdout  # 20x21x22 in 17x32x32 extents


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_cli_in_parallel():
    import shutil
    import tempfile
    from pathlib import Path

    from mpi4py import MPI

    from parvox.slicing import Plane, reference_slice
    from parvox.volume import phantom

    comm = MPI.COMM_WORLD
    root = Path(comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None))
    store = str(root / "s")
    assert cli.main(["phantom", store, "--shape", "37,45,53", "--rgb", "--disks", "5",
                     "--extent", "5,7,6", "--no-progress"]) == 0
    assert cli.main(["verify", store]) == 0
    assert cli.main(["pyramid", store, "--levels", "2", "--no-progress"]) == 0
    assert cli.main(["export", store, str(root / "o.ome.zarr"), "--no-progress"]) == 0
    assert cli.main(["ingest", str(root / "o.ome.zarr"), str(root / "b"), "--disks", "3",
                     "--levels", "2", "--codec", "zstd", "--no-progress"]) == 0
    assert cli.main(["verify", str(root / "b")]) == 0
    out = str(root / "o.npy")
    assert cli.main(["slice", store, "--center", "18.5,22,26", "--u", "0.3,1,0.2", "--v",
                     "1,0,0.5", "--size", "33,41", "--zoom", "3", "-o", out]) == 0
    comm.Barrier()
    if comm.Get_rank() == 0:
        plane = Plane((18.5, 22, 26), (0.3, 1, 0.2), (1, 0, 0.5), (33, 41), zoom=3)
        ref = reference_slice(phantom((37, 45, 53), rgb=True), plane)
        np.testing.assert_allclose(np.load(out), ref, rtol=1e-5, atol=1e-3)
        from parvox.volume import VolumeStore
        from parvox.volume.pyramid import downsample

        lv2 = VolumeStore(root / "b", level=2).read_volume()
        np.testing.assert_array_equal(lv2, downsample(phantom((37, 45, 53), rgb=True), 2))
        shutil.rmtree(root)
