"""``parvox filter``: the file written equals scipy.ndimage on the whole array, per format.

Each case runs the CLI's entry (:func:`parvox.cli.main`) on every rank of an MPI job at the
case's rank count; the cases of one rank count share one mpiexec (:func:`parvox.testing.mpi_test`),
which the separate ``parvox filter -n K`` launch of each case cost 5 s on two cores. One test
still launches ``parvox filter -n 2`` as a user does.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.io import read_image, write_image
from parvox.testing import mpi_test

from ._helpers import check_ok, run_parvox

RNG = np.random.default_rng(5)
IMAGE = RNG.random((97, 61)).astype(np.float32)
VOLUME = RNG.random((17, 23, 29)).astype(np.float32)
GREY8 = RNG.integers(0, 256, (61, 97)).astype(np.uint8)
GREY16 = RNG.integers(0, 65536, (45, 38)).astype(np.uint16)
RGB = RNG.integers(0, 256, (33, 41, 3)).astype(np.uint8)


MASK = ndi.gaussian_filter(RNG.random((53, 47)), 2.0) > 0.5


def _scipy(op, a, sigma=1.0, size=3, axis=-1, mode="reflect", percentile=50.0, iterations=1):
    if op == "gaussian":
        return ndi.gaussian_filter(a, sigma, mode=mode)
    if op in ("sobel", "prewitt"):
        return getattr(ndi, op)(a, axis=axis, mode=mode)
    if op == "laplace":
        return ndi.laplace(a, mode=mode)
    if op in ("gaussian_laplace", "gaussian_gradient_magnitude"):
        return getattr(ndi, op)(a, sigma, mode=mode)
    if op == "percentile":
        return ndi.percentile_filter(a, percentile, size=size, mode=mode)
    if op == "binary_fill_holes":
        return ndi.binary_fill_holes(a)
    if op.startswith("binary_"):
        return getattr(ndi, op)(a, iterations=iterations)
    if op.startswith("grey_"):
        for _ in range(iterations):
            a = getattr(ndi, op)(a, size=size, mode=mode)
        return a
    if op == "distance":
        return ndi.distance_transform_edt(a)
    return getattr(ndi, f"{op}_filter")(a, size=size, mode=mode)


#: (input name, array, output name, nprocs, CLI arguments, scipy keywords)
CASES = [
    ("in.npy", IMAGE, "o.npy", 3, ["--op", "gaussian", "--sigma", "2.5"], {"sigma": 2.5}),
    (
        "in.npy",
        IMAGE,
        "o.npy",
        4,
        ["--op", "uniform", "--size", "4", "--mode", "wrap"],
        {"size": 4, "mode": "wrap"},
    ),
    (
        "in.npy",
        IMAGE,
        "o.tif",
        2,
        ["--op", "median", "--size", "5", "--mode", "mirror"],
        {"size": 5, "mode": "mirror"},
    ),
    (
        "in.npy",
        IMAGE,
        "o.npy",
        3,
        ["--op", "minimum", "--size", "7", "--mode", "nearest"],
        {"size": 7, "mode": "nearest"},
    ),
    (
        "in.npy",
        IMAGE,
        "o.npy",
        4,
        ["--op", "maximum", "--size", "2", "--mode", "constant"],
        {"size": 2, "mode": "constant"},
    ),
    ("in.npy", IMAGE, "o.npy", 3, ["--op", "sobel", "--axis", "0"], {"axis": 0}),
    (
        "in.tif",
        VOLUME,
        "o.tif",
        4,
        ["--op", "gaussian", "--sigma", "1.5", "--mode", "nearest"],
        {"sigma": 1.5, "mode": "nearest"},
    ),
    ("in.tiff", VOLUME, "o.npy", 3, ["--op", "median", "--size", "3"], {"size": 3}),
    ("in.png", GREY8, "o.png", 3, ["--op", "median", "--size", "3"], {"size": 3}),
    ("in.png", GREY8, "o.png", 2, ["--op", "gaussian", "--sigma", "2"], {"sigma": 2.0}),
    ("in.png", GREY16, "o.png", 4, ["--op", "maximum", "--size", "3"], {"size": 3}),
    ("in.png", RGB, "o.png", 3, ["--op", "minimum", "--size", "3"], {"size": 3}),
    ("in.npy", IMAGE, "o.npy", 4, ["--op", "prewitt", "--axis", "-1", "--mode", "wrap"],
     {"axis": -1, "mode": "wrap"}),
    ("in.tif", VOLUME, "o.npy", 3, ["--op", "laplace", "--mode", "mirror"], {"mode": "mirror"}),
    ("in.npy", IMAGE, "o.tif", 2, ["--op", "gaussian_laplace", "--sigma", "1.5"], {"sigma": 1.5}),
    ("in.npy", VOLUME, "o.npy", 4, ["--op", "gaussian_gradient_magnitude", "--sigma", "2"],
     {"sigma": 2.0}),
    ("in.png", GREY8, "o.png", 3, ["--op", "percentile", "--percentile", "-20", "--size", "4"],
     {"percentile": -20.0, "size": 4}),
    ("in.png", MASK, "o.png", 4, ["--op", "binary_opening", "--iterations", "3"],
     {"iterations": 3}),
    ("in.npy", MASK, "o.npy", 3, ["--op", "binary_dilation", "--iterations", "0"],
     {"iterations": 0}),
    ("in.png", MASK, "o.png", 2, ["--op", "binary_fill_holes"], {}),
    ("in.png", GREY8, "o.png", 4, ["--op", "grey_erosion", "--size", "3", "--iterations", "2"],
     {"size": 3, "iterations": 2}),
    ("in.png", MASK, "o.npy", 3, ["--op", "distance"], {}),
    ("in.npy", IMAGE[:5], "o.npy", 4, ["--op", "grey_dilation", "--size", "7"], {"size": 7}),
    ("in.npy", IMAGE, "o.npy", 2, ["--op", "median", "--size", "5", "--threads", "2"],
     {"size": 5}),
    ("in.tif", VOLUME, "o.npy", 3, ["--op", "gaussian", "--sigma", "1.2", "--threads", "3"],
     {"sigma": 1.2}),
]


def _case_body(src, array, dst, args, kw):
    """A body run on every rank of an MPI job: ``parvox filter`` (the CLI's entry, inside the
    job) writes OUT, which must equal scipy on the whole array bit for bit."""

    def body():
        from mpi4py import MPI

        from parvox.cli import main

        world = MPI.COMM_WORLD
        tmp = Path(world.bcast(tempfile.mkdtemp(prefix="parvox-filter-") if world.rank == 0 else None))
        if world.rank == 0:
            write_image(tmp / src, array)
        world.Barrier()
        assert main(["filter", str(tmp / src), str(tmp / dst), *args]) == 0
        world.Barrier()
        if world.rank == 0:
            try:
                got = read_image(tmp / dst)
            finally:
                shutil.rmtree(tmp)
            want = _scipy(args[1], array, **kw)
            assert got.shape == want.shape
            assert got.dtype == want.dtype
            assert np.array_equal(got, want)  # bit for bit

    return body


def _register(name, nprocs, body):
    """Make ``body`` the MPI test ``name`` at ``nprocs`` ranks (a module global, so pytest and
    the harness's ranks find it). All cases at one rank count share one mpiexec launch."""
    body.__name__ = body.__qualname__ = name
    globals()[name] = mpi_test(ranks=(nprocs,), timeout=60)(body)


for _i, (_src, _array, _dst, _nprocs, _args, _kw) in enumerate(CASES):
    _register(
        f"test_filter_equals_scipy_{_i}_{_args[1]}_{_src.replace('.', '_')}_to_{_dst.split('.')[1]}",
        _nprocs,
        _case_body(_src, _array, _dst, _args, _kw),
    )
#: a Gaussian of sigma 6 reaches 24 rows: wider than a 5-row slab at 4 ranks
_register(
    "test_kernel_wider_than_a_slab_still_equals_scipy",
    4,
    _case_body("in.npy", IMAGE[:20], "o.npy", ["--op", "gaussian", "--sigma", "6"], {"sigma": 6.0}),
)


def test_dtype_converts_before_filtering(tmp_path):
    """One real ``parvox filter ... -n 2`` (relaunched under mpiexec) from end to end."""
    write_image(tmp_path / "in.png", GREY8)
    check_ok(
        run_parvox(
            "filter",
            str(tmp_path / "in.png"),
            str(tmp_path / "o.tif"),
            "--op",
            "sobel",
            "--dtype",
            "float32",
            "-n",
            "2",
        )
    )
    got = read_image(tmp_path / "o.tif")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ndi.sobel(GREY8.astype(np.float32)), rtol=1e-5)


#: (CLI arguments after IN OUT, the argument the one-line error names, words in it)
BAD = [
    (["--op", "percentile", "--percentile", "101"], "argument --percentile", "[-100, 100]"),
    (["--op", "gaussian", "--iterations", "2"], "argument --iterations", "does not take"),
    (["--op", "binary_erosion", "--mode", "wrap"], "argument --mode", "does not take"),
    (["--op", "grey_erosion", "--iterations", "0"], "argument --iterations", "must be >= 1"),
    (["--op", "laplace", "--size", "3"], "argument --size", "does not take"),
    (["--op", "distance", "--sigma", "1"], "argument --sigma", "no parameters"),
    (["--op", "gaussian", "--threads", "0"], "argument --threads", ">= 1"),
    (["--op", "binary_erosion", "--threads", "2"], "argument --threads", "one thread per rank"),
]


@pytest.mark.parametrize(("argv", "argument", "words"), BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, argv, argument, words):
    from parvox.cli import main

    np.save(tmp_path / "in.npy", IMAGE)
    with pytest.raises(SystemExit) as info:
        main(["filter", str(tmp_path / "in.npy"), str(tmp_path / "o.npy"), *argv])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and argument in lines[0] and words in lines[0], lines


def test_float_results_are_refused_for_png_before_anything_runs(tmp_path, capsys):
    from parvox.cli import main

    write_image(tmp_path / "in.png", MASK)
    with pytest.raises(SystemExit):
        main(["filter", str(tmp_path / "in.png"), str(tmp_path / "o.png"), "--op", "distance"])
    assert "argument OUT" in (err := capsys.readouterr().err) and "PNG holds integer images only, got float64" in err
