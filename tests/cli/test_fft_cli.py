"""``parvox fft``: the file written equals numpy.fft of the file read; bad input exits 2."""

from __future__ import annotations

import numpy as np
import pytest

from ._helpers import check_ok, run_parvox

RNG = np.random.default_rng(15)
REAL = RNG.standard_normal((9, 10, 7))
COMPLEX = (RNG.standard_normal((5, 7, 6)) + 1j * RNG.standard_normal((5, 7, 6))).astype(np.complex64)

#: (input, CLI arguments, NumPy's result, nprocs)
CASES = [
    (REAL, ["--real", "--window", "3", "--tests", "2"], lambda: np.fft.rfftn(REAL), 3),
    (np.fft.rfftn(REAL), ["--real", "--inverse", "--shape", "9", "10", "7", "--tile", "auto"],
     lambda: np.fft.irfftn(np.fft.rfftn(REAL), s=(9, 10, 7), axes=(0, 1, 2)), 4),
    (COMPLEX, ["--inverse", "--norm", "ortho", "--decomposition", "pencil", "--shape", "6", "7",
               "5"], lambda: np.fft.ifftn(COMPLEX, s=(6, 7, 5), axes=(0, 1, 2), norm="ortho"), 2),
]


@pytest.mark.parametrize(("array", "args", "want", "nprocs"), CASES,
                         ids=["rfftn-np3", "irfftn-np4", "ifftn-pencil-np2"])
def test_fft_equals_numpy(tmp_path, array, args, want, nprocs):
    np.save(tmp_path / "in.npy", array)
    proc = run_parvox("fft", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), *args,
                      "-n", str(nprocs))
    check_ok(proc)
    got, ref = np.load(tmp_path / "out.npy"), want()
    assert got.dtype == ref.dtype and got.shape == ref.shape
    tol = 2e-6 if ref.dtype in (np.complex64, np.float32) else 1e-12
    assert np.linalg.norm(got - ref) <= tol * np.linalg.norm(ref)
    assert proc.stdout.startswith("parvox fft: ")


@pytest.mark.parametrize(
    ("args", "argument"),
    [
        (["in.npy", "out.png"], "OUT"),
        (["flat.npy", "out.npy"], "IN"),
        (["in.npy", "out.npy", "--shape", "4", "0", "4"], "--shape"),
        (["in.npy", "out.npy", "--tile", "-3"], "--tile"),
        (["in.npy", "out.npy", "--window", "0"], "--window"),
        (["in.npy", "out.npy", "--window", "wide"], "--window"),
        (["in.npy", "out.npy", "--tests", "-1"], "--tests"),
        (["cplx.npy", "out.npy", "--real"], "IN"),
    ],
)
def test_bad_input_names_the_argument(tmp_path, args, argument):
    np.save(tmp_path / "in.npy", REAL)
    np.save(tmp_path / "cplx.npy", COMPLEX)
    np.save(tmp_path / "flat.npy", REAL[0])
    proc = run_parvox("fft", *(str(tmp_path / a) if a.endswith((".npy", ".png")) else a
                               for a in args), "-n", "2")
    assert proc.returncode == 2, proc.stderr
    assert f"argument {argument}" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.npy").exists()
