"""``parvox composite`` and ``parvox trace``: results equal the serial references; bad input."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from parvox import cli
from parvox.compositing import composite_serial, premultiply
from parvox.particles import abc_field, seed_points, trace_serial
from parvox.testing import mpi_test


def _stack(path, b=6, seed=0):
    rng = np.random.default_rng(seed)
    stack = premultiply(rng.random((b, 37, 29, 4), dtype=np.float32))
    np.save(path, stack)
    return stack


def test_composite_and_trace_in_process(tmp_path):
    stack = _stack(tmp_path / "in.npy")
    assert (
        cli.main(["composite", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--k", "3,2"])
        == 0
    )
    np.testing.assert_allclose(
        np.load(tmp_path / "out.npy"), composite_serial(stack), rtol=1e-5, atol=1e-6
    )
    out = tmp_path / "ends.npy"
    assert (
        cli.main(["trace", "--seeds", "20", "--steps", "60", "--blocks", "8", "-o", str(out)]) == 0
    )
    seeds = seed_points(abc_field(), 20, seed=0)
    assert np.abs(np.load(out) - trace_serial(abc_field(), seeds, 60, 0.05)).max() <= 1e-9


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["composite", "{d}/in.npy", "{d}/o.npy", "--k", "1"], "argument --k: k must be >= 2"),
        (
            ["composite", "{d}/in.npy", "{d}/o.npy", "--k", "4,2"],
            "argument --k: k-values [4, 2] do not fit 6",
        ),
        (["composite", "{d}/missing.npy", "{d}/o.npy"], "argument IN.npy: no such file"),
        (["composite", "{d}/bad.npy", "{d}/o.npy"], "argument IN.npy: must hold a (B, H, W, 4)"),
        (["composite", "{d}/in.npy", "{d}/o.png"], "argument OUT.npy: must end in .npy"),
        (["trace", "--h", "0", "-o", "{d}/o.npy"], "argument --h"),
        (["trace", "--seeds", "-1", "-o", "{d}/o.npy"], "argument --seeds"),
        (["trace", "--blocks", "0", "-o", "{d}/o.npy"], "argument --blocks"),
        (["trace", "--threads", "0", "-o", "{d}/o.npy"], "argument --threads"),
        (["trace", "--field", "{d}/bad.npy", "-o", "{d}/o.npy"], "argument --field"),
        (["trace", "--field", "vortex", "-o", "{d}/o.npy"], "argument --field"),
    ],
)
def test_bad_command_lines_exit_2_naming_the_argument(tmp_path, capsys, argv, needle):
    _stack(tmp_path / "in.npy")
    np.save(tmp_path / "bad.npy", np.zeros((3, 4)))
    with pytest.raises(SystemExit) as exc:
        cli.main([a.format(d=tmp_path) for a in argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


@mpi_test(ranks=(2, 3, 4), timeout=120)
def test_composite_and_trace_under_mpi_equal_serial():
    import tempfile

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    d = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None)
    b = 4 * comm.Get_size()
    if comm.Get_rank() == 0:
        _stack(f"{d}/in.npy", b=b, seed=2)
    comm.Barrier()
    stack = np.load(f"{d}/in.npy")
    assert cli.main(["composite", f"{d}/in.npy", f"{d}/out.npy", "--k", "4", "--threads", "2"]) == 0
    assert (
        cli.main(["trace", "--seeds", "30", "--steps", "80", "--threads", "2", "-o", f"{d}/t.npy"])
        == 0
    )
    comm.Barrier()
    if comm.Get_rank() == 0:
        np.testing.assert_allclose(
            np.load(f"{d}/out.npy"), composite_serial(stack), rtol=1e-5, atol=1e-6
        )
        ref = trace_serial(abc_field(), seed_points(abc_field(), 30, seed=0), 80, 0.05)
        assert np.abs(np.load(f"{d}/t.npy") - ref).max() <= 1e-9


def test_dash_n_launches_mpiexec(tmp_path):
    stack = _stack(tmp_path / "in.npy", b=8)
    out = tmp_path / "out.npy"
    cmd = [
        sys.executable,
        "-m",
        "parvox",
        "composite",
        str(tmp_path / "in.npy"),
        str(out),
        "--k",
        "4,2",
        "-n",
        "2",
    ]
    subprocess.run(cmd, check=True, timeout=120)
    np.testing.assert_allclose(np.load(out), composite_serial(stack), rtol=1e-5, atol=1e-6)
