"""Launching: ``-n`` relaunch, external mpiexec, aborts on a failing rank, exit 2 on bad input."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.cli import main

from ._helpers import check_ok, ranks_that_ran, run_parvox


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    path = tmp_path_factory.mktemp("launch") / "in.npy"
    np.save(path, np.random.default_rng(11).random((97, 61)).astype(np.float32))
    return path


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_relaunch_at_each_rank_count_gives_scipy_result(image, tmp_path, nprocs):
    out = tmp_path / f"out{nprocs}.npy"
    check_ok(
        run_parvox(
            "filter", str(image), str(out), "--op", "median", "--size", "5", "-n", str(nprocs),
            ranks_log=tmp_path,
        )
    )
    assert np.array_equal(np.load(out), ndi.median_filter(np.load(image), size=5))
    assert ranks_that_ran(tmp_path) == [(r, nprocs) for r in range(nprocs)]  # one job of N


def test_without_n_runs_in_process_on_one_rank(image, tmp_path):
    out = tmp_path / "out.npy"
    check_ok(run_parvox("filter", str(image), str(out), "--op", "maximum", "--size", "4",
                        ranks_log=tmp_path))
    assert np.array_equal(np.load(out), ndi.maximum_filter(np.load(image), size=4))
    assert ranks_that_ran(tmp_path) == []  # no mpiexec: a singleton in this process


@pytest.mark.parametrize("n_flag", [[], ["-n", "2"]])
def test_inside_external_mpiexec_uses_the_world(image, tmp_path, n_flag):
    out = tmp_path / "out.npy"
    check_ok(
        run_parvox(
            "filter", str(image), str(out), "--op", "minimum", "--size", "3", *n_flag, mpiexec=2,
            ranks_log=tmp_path,
        )
    )
    assert np.array_equal(np.load(out), ndi.minimum_filter(np.load(image), size=3))
    assert ranks_that_ran(tmp_path) == [(0, 2), (1, 2)]  # the job's ranks, no second launch


def test_inside_external_mpiexec_a_conflicting_n_is_an_error(image, tmp_path):
    out = tmp_path / "out.npy"
    proc = run_parvox("filter", str(image), str(out), "--op", "median", "-n", "3", mpiexec=2)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "-n/--nprocs: 3 conflicts with the MPI job's 2 ranks" in lines[0]
    assert not out.exists()


def test_bad_input_inside_external_mpiexec_is_one_line(tmp_path):
    proc = run_parvox(
        "filter",
        str(tmp_path / "missing.npy"),
        str(tmp_path / "o.npy"),
        "--op",
        "median",
        mpiexec=3,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"parvox filter: error: argument IN: {tmp_path / 'missing.npy'}: no such file"
    ]


# ---------------------------------------------------------------- a rank that fails
FAULTY = '''
"""A subcommand that fails on one rank while the others wait in a collective."""
HELP = "fail on one rank"


def add_arguments(parser):
    parser.add_argument("--rank", type=int, default=1)
    parser.add_argument("--kind", choices=["runtime", "value", "value-all"], default="runtime")


def validate(args):
    pass


def run(args):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if args.kind == "value-all":
        raise ValueError("bad data seen by every rank")
    if comm.Get_rank() == args.rank:
        exc = RuntimeError if args.kind == "runtime" else ValueError
        raise exc(f"boom on rank {args.rank}")
    comm.Barrier()  # never completes: without an abort this would hang
    return 0
'''

DRIVER = """
import sys

from parvox import cli

cli.SUBCOMMANDS["faulty"] = "faulty_cmd"
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    where = tmp_path_factory.mktemp("faulty")
    (where / "faulty_cmd.py").write_text(textwrap.dedent(FAULTY))
    (where / "driver.py").write_text(textwrap.dedent(DRIVER))
    return where


@pytest.mark.parametrize("failing", [0, 2])
def test_an_exception_on_one_rank_aborts_the_job(driver, failing):
    proc = run_parvox(
        "faulty",
        "--rank",
        str(failing),
        driver=[str(driver / "driver.py")],
        mpiexec=3,
        pythonpath=str(driver),
        timeout=60,
    )
    assert proc.returncode != 0
    assert f"parvox: rank {failing} failed: RuntimeError: boom on rank {failing}" in proc.stderr


def test_a_value_error_on_one_rank_aborts_with_code_2(driver):
    proc = run_parvox(
        "faulty",
        "--rank",
        "1",
        "--kind",
        "value",
        driver=[str(driver / "driver.py")],
        mpiexec=3,
        pythonpath=str(driver),
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "parvox faulty: error (rank 1): boom on rank 1" in proc.stderr


def test_a_value_error_on_every_rank_is_reported_by_rank_0(driver):
    proc = run_parvox(
        "faulty",
        "--kind",
        "value-all",
        driver=[str(driver / "driver.py")],
        mpiexec=3,
        pythonpath=str(driver),
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "parvox faulty: error: bad data seen by every rank" in proc.stderr


def test_an_io_error_every_rank_sees_is_one_line_without_abort(tmp_path):
    checker = (np.indices((600, 600)).sum(0) % 2).astype(np.uint8)  # 180000 components
    np.save(tmp_path / "c.npy", checker)
    proc = run_parvox("label", str(tmp_path / "c.npy"), str(tmp_path / "c.png"), "-n", "3")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"parvox label: error: {tmp_path / 'c.png'}: values 0..180000 do not fit a 16-bit PNG "
        "(0..65535); write .npy or .tif"
    ]


# ---------------------------------------------------------------- bad input: exit 2, one line
GOOD, PNG8, OUT = "{tmp}/in.npy", "{tmp}/in.png", "{tmp}/out.npy"
F = ["filter", GOOD, OUT]
#: (argv with {tmp} for the data directory, argument named in the message, words in it)
BAD_CASES = [
    (["filter", "{tmp}/missing.npy", OUT, "--op", "median"], "argument IN", "no such file"),
    (["filter", "{tmp}/in.jpg", OUT, "--op", "median"], "argument IN", "unsupported extension"),
    (["filter", "{tmp}/garbage.npy", OUT, "--op", "median"], "argument IN", "cannot read npy data"),
    (["filter", GOOD, "{tmp}/out.gif", "--op", "median"], "argument OUT", "unsupported extension"),
    (["filter", GOOD, "{tmp}/nodir/o.npy", "--op", "median"], "argument OUT", "does not exist"),
    (["filter", GOOD, "{tmp}/out.png", "--op", "gaussian"], "argument OUT", "PNG holds integer images only"),
    ([*F, "--op", "blur"], "argument --op", "unknown filter 'blur'"),
    ([*F, "--op", "gaussian", "--sigma", "-1"], "argument --sigma", "must be a finite number >= 0"),
    ([*F, "--op", "gaussian", "--sigma", "nan"], "argument --sigma", "must be a finite number"),
    ([*F, "--op", "gaussian", "--sigma", "x"], "argument --sigma", "invalid float value"),
    ([*F, "--op", "median", "--size", "0"], "argument --size", "must be >= 1"),
    ([*F, "--op", "median", "--mode", "bounce"], "argument --mode", "unknown mode 'bounce'"),
    ([*F, "--op", "median", "--sigma", "2"], "argument --sigma", "does not take --sigma"),
    ([*F, "--op", "gaussian", "--size", "3"], "argument --size", "does not take --size"),
    ([*F, "--op", "uniform", "--axis", "0"], "argument --axis", "does not take --axis"),
    ([*F, "--op", "sobel", "--axis", "2"], "argument --axis", "must be in [-2, 2)"),
    ([*F, "--op", "median", "--dtype", "float99"], "argument --dtype", "not a NumPy dtype"),
    ([*F, "--op", "median", "-n", "0"], "argument -n/--nprocs", "must be >= 1"),
    (["filter", GOOD, OUT], "--op", "required"),
    (["label", GOOD, OUT, "--connectivity", "0"], "argument --connectivity", "must be >= 1"),
    (["label", PNG8, OUT, "--connectivity", "3"], "argument --connectivity", "1..2"),
    (["label", "{tmp}/missing.tif", OUT], "argument IN", "no such file"),
    (["demo", "--size", "8"], "argument --size", "must be in 32..16384"),
    (["demo", "--sigma", "0"], "argument --sigma", "must be a finite number > 0"),
    (["demo", "--out", GOOD], "argument --out", "is not a directory"),
    (["nosuch"], "invalid choice", "nosuch"),
]


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    np.save(tmp / "in.npy", np.zeros((8, 9), np.float32))
    from parvox.io import write_image

    write_image(tmp / "in.png", np.zeros((8, 9), np.uint8))
    (tmp / "in.jpg").write_bytes(b"\xff\xd8")
    (tmp / "garbage.npy").write_bytes(b"not numpy")
    return tmp


@pytest.mark.parametrize(("argv", "argument", "words"), BAD_CASES, ids=[c[2] for c in BAD_CASES])
def test_bad_input_exits_2_with_one_line_naming_the_argument(
    bad_dir, capsys, argv, argument, words
):
    with pytest.raises(SystemExit) as info:
        main([a.format(tmp=bad_dir) for a in argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert argument in lines[0] and words in lines[0], lines[0]


@pytest.mark.parametrize(
    "argv_tail", [["--op", "blur", "-n", "4"], ["--op", "median", "--size", "-3"]]
)
def test_bad_input_from_the_shell_exits_2_before_any_launch(bad_dir, argv_tail):
    proc = run_parvox("filter", str(bad_dir / "in.npy"), str(bad_dir / "o.npy"), *argv_tail)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("parvox filter: error: argument --")
