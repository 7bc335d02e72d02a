"""``parvox recon simulate|osem``: files written, the image equals the library's, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ._helpers import check_ok, run_parvox

TINY = ["--scanner", "tiny", "--no-progress"]


@pytest.fixture(scope="module")
def acquisition(tmp_path_factory):
    out = tmp_path_factory.mktemp("recon") / "scan"
    proc = run_parvox("recon", "simulate", str(out), "--phantom", "iec", "--counts", "4e4",
                      "--seed", "3", "--shape", "7,15,13", "--voxel", "3,2.5,2.5",
                      "--randoms", "0.1", *TINY, "-n", "3")
    check_ok(proc)
    assert "events" in proc.stdout
    return out


def test_simulate_writes_the_acquisition(acquisition):
    from parvox.recon import Acquisition, read_header

    acq = Acquisition.load(acquisition)
    assert acq.grid.shape == (7, 15, 13) and acq.grid.voxel_size == (3.0, 2.5, 2.5)
    assert acq.scanner.name == "tiny"
    info = json.loads((acquisition / "acquisition.json").read_text())
    assert read_header(acq.events)["n_events"] == info["events"] == info["trues"] + info["randoms"]
    assert acq.truth().sum() == pytest.approx(4e4)
    assert acq.mu() is not None and acq.labels().max() == len(acq.regions)


def test_osem_writes_the_library_image_and_scores_it(acquisition, tmp_path):
    from parvox.recon import Acquisition, Truth, osem, sensitivity

    out = tmp_path / "recon.nii.gz"
    proc = run_parvox("recon", "osem", str(acquisition), "-o", str(out), "--subsets", "3",
                      "--iterations", "2", "--postfilter", "4.5", "--no-progress", "-n", "2")
    check_ok(proc)
    for words in ("3 subsets x 2 iterations, post-filter 4.5 mm FWHM", "iteration 2",
                  "NRMSE", "contrast recovery", "cold: lung insert", "communication overhead",
                  "eq. 2", "reading and ray tracing", "warm-up", "computed, cached"):
        assert words in proc.stdout, words
    import nibabel

    img = nibabel.load(str(out))
    data = np.asarray(img.dataobj).transpose(2, 1, 0)
    np.testing.assert_allclose(np.diag(img.affine)[:3], [2.5, 2.5, 3.0])
    acq = Acquisition.load(acquisition)
    np.testing.assert_allclose(img.affine[:3, 3], acq.grid.origin[::-1])
    ref = osem(acq.events, acq.scanner, acq.grid,
               sensitivity(acq.scanner, acq.grid, mu=acq.mu()), subsets=3, iterations=2,
               postfilter=4.5, truth=Truth(acq.truth(), acq.labels(), acq.regions))
    np.testing.assert_allclose(data, ref.image, rtol=1e-9, atol=1e-12)
    # the printed scores per iteration are the library's
    for sc in ref.scores:
        assert f"iteration {sc.iteration}: " in proc.stdout
        assert f"NRMSE {sc.nrmse:.4f}" in proc.stdout
    assert (tmp_path / "recon.png").stat().st_size > 0
    # a second run reads the cached sensitivity image
    again = run_parvox("recon", "osem", str(acquisition), "-o", str(tmp_path / "b.npy"),
                       "--subsets", "3", "--iterations", "1", "--mode", "blocking",
                       "--no-progress")
    check_ok(again)
    assert "read from" in again.stdout and "eq. 2" not in again.stdout
    assert (tmp_path / "b.png").exists()


def test_osem_defaults_are_the_librarys_and_each_iteration_is_scored(acquisition, tmp_path):
    from parvox.recon.osem import DEFAULT_ITERATIONS, DEFAULT_POSTFILTER, DEFAULT_SUBSETS

    proc = run_parvox("recon", "osem", str(acquisition), "-o", str(tmp_path / "d.npy"),
                      "--no-progress")
    check_ok(proc)
    assert (f"{DEFAULT_SUBSETS} subsets x {DEFAULT_ITERATIONS} iterations, post-filter "
            f"{DEFAULT_POSTFILTER:g} mm FWHM") in proc.stdout
    lines = [x for x in proc.stdout.splitlines() if x.startswith("  iteration ")]
    assert len(lines) == DEFAULT_ITERATIONS
    assert all("NRMSE" in x and "contrast recovery" in x for x in lines), lines
    none = run_parvox("recon", "osem", str(acquisition), "-o", str(tmp_path / "e.npy"),
                      "--postfilter", "0", "--iterations", "1", "--no-progress")
    check_ok(none)
    assert "no post-filter" in none.stdout and "post-filtered" not in none.stdout


def test_an_image_file_as_the_activity(tmp_path):
    activity = np.zeros((5, 9, 11))
    activity[1:4, 3:6, 2:9] = 1.5
    np.save(tmp_path / "act.npy", activity)
    out = tmp_path / "img"
    check_ok(run_parvox("recon", "simulate", str(out), "--phantom", str(tmp_path / "act.npy"),
                        "--counts", "2000", "--voxel", "2", *TINY))
    truth = np.load(out / "truth.npy")
    np.testing.assert_allclose(truth, activity / activity.sum() * 2000)
    bad = run_parvox("recon", "simulate", str(tmp_path / "other"), "--phantom",
                     str(tmp_path / "act.npy"), "--counts", "2000", "--shape", "5,9,10", *TINY)
    assert bad.returncode == 2 and "--shape" in bad.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["simulate", "{d}/a", "--phantom", "iec", "--counts", "-3"], "--counts"),
        (["simulate", "{d}/a", "--phantom", "iec", "--counts", "1e3", "--shape", "4,0,4"],
         "--shape"),
        (["simulate", "{d}/a", "--phantom", "nope.npy", "--counts", "1e3"], "--phantom"),
        (["osem", "{d}/missing", "-o", "{d}/r.npy"], "OUT"),
        (["osem", "{acq}", "-o", "{d}/r.png"], "-o/--output"),
        (["osem", "{acq}", "-o", "{d}/r.npy", "--subsets", "0"], "--subsets"),
        (["osem", "{acq}", "-o", "{d}/r.npy", "--postfilter", "-1"], "--postfilter"),
        (["osem", "{acq}", "-o", "{d}/r.npy", "--postfilter", "nan"], "--postfilter"),
        (["osem", "{acq}", "-o", "{d}/r.npy", "--threads", "0"], "--threads"),
        (["osem", "{acq}", "-o", "{d}/r.npy", "--threads", "two"], "--threads"),
        (["osem", "{acq}", "-o", "{d}/r.npy", "--algorithm", "fastest"], "--algorithm"),
        (["osem", "{acq}", "-o", "{d}/r.npy", "--algorithm", "shared"], "--algorithm"),
    ],
)
def test_bad_input_exits_2_naming_the_argument(args, named, acquisition, tmp_path):
    argv = [a.format(d=tmp_path, acq=acquisition) for a in args]
    proc = run_parvox("recon", *argv)
    assert proc.returncode == 2, proc.stderr
    assert f"argument {named}" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_osem_threads_per_rank_give_the_one_thread_image(acquisition, tmp_path, monkeypatch):
    from parvox.recon import Acquisition, osem, sensitivity

    monkeypatch.delenv("PARVOX_THREADS", raising=False)
    help_text = run_parvox("recon", "osem", "--help")
    check_ok(help_text)
    assert "--threads T" in help_text.stdout and "$PARVOX_THREADS, else" in help_text.stdout
    kw = ["--subsets", "3", "--iterations", "1", "--postfilter", "0", "--no-progress"]
    proc = run_parvox("recon", "osem", str(acquisition), "-o", str(tmp_path / "t.npy"),
                      "--threads", "2", *kw, "-n", "2")
    check_ok(proc)
    assert "2 ranks x 2 threads" in proc.stdout
    acq = Acquisition.load(acquisition)
    ref = osem(acq.events, acq.scanner, acq.grid,
               sensitivity(acq.scanner, acq.grid, mu=acq.mu()), subsets=3, iterations=1)
    np.testing.assert_allclose(np.load(tmp_path / "t.npy"), ref.image, rtol=1e-9, atol=1e-12)
    monkeypatch.setenv("PARVOX_THREADS", "3")
    env = run_parvox("recon", "osem", str(acquisition), "-o", str(tmp_path / "e.npy"), *kw)
    check_ok(env)
    assert "1 rank x 3 threads" in env.stdout
    monkeypatch.setenv("PARVOX_THREADS", "0")
    bad = run_parvox("recon", "osem", str(acquisition), "-o", str(tmp_path / "f.npy"), *kw)
    assert bad.returncode == 2 and "argument PARVOX_THREADS" in bad.stderr, bad.stderr


def test_osem_shared_sum_on_three_ranks_is_the_librarys_image(acquisition, tmp_path):
    """``--algorithm shared --mode blocking`` at 3 ranks: the one-rank image to rounding."""
    from parvox.recon import Acquisition, osem, sensitivity

    proc = run_parvox("recon", "osem", str(acquisition), "-o", str(tmp_path / "s.npy"),
                      "--algorithm", "shared", "--mode", "blocking", "--subsets", "3",
                      "--iterations", "1", "--postfilter", "0", "--no-progress", "-n", "3")
    check_ok(proc)
    assert "mode blocking, images summed by shared, 3 ranks" in proc.stdout, proc.stdout
    acq = Acquisition.load(acquisition)
    ref = osem(acq.events, acq.scanner, acq.grid,
               sensitivity(acq.scanner, acq.grid, mu=acq.mu()), subsets=3, iterations=1)
    np.testing.assert_allclose(np.load(tmp_path / "s.npy"), ref.image, rtol=1e-9, atol=1e-12)
