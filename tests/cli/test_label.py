"""``parvox label``: labels (numbers included) equal scipy.ndimage.label, per format.

The format cases run the CLI's entry inside the harness's MPI launches at each case's rank
count (a launch of ``parvox label -n K`` per case cost 3-5 s on two cores); one test still
launches ``parvox label -n 4`` as a user does.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
from pathlib import Path

import numpy as np
import scipy.ndimage as ndi

from parvox.io import read_image, write_image
from parvox.testing import mpi_test

from ._helpers import check_ok, refused, run_parvox

RNG = np.random.default_rng(9)
MASK2 = RNG.random((97, 61)) > 0.55
MASK3 = RNG.random((17, 23, 29)) > 0.7

#: (input name, array, output name, nprocs, connectivity, --threads)
CASES = [
    ("in.npy", MASK2.astype(np.uint8), "o.npy", 3, 1, "2"),
    ("in.npy", MASK2.astype(np.float32), "o.tif", 4, 2, None),
    ("in.png", MASK2, "o.png", 2, 2, "3"),
    ("in.png", MASK2.astype(np.uint8) * 255, "o.npy", 1, 1, "2"),
    ("in.tif", MASK3.astype(np.uint16), "o.npy", 4, 3, "2"),
    ("in.tif", MASK3, "o.tif", 3, 1, None),
]


def _case_body(src, array, dst, connectivity, threads):
    """A body run on every rank of an MPI job: ``parvox label`` (the CLI's entry, inside the
    job) writes OUT, which must equal scipy's labels, and prints scipy's component count."""

    def body():
        from mpi4py import MPI

        from parvox.cli import main

        world = MPI.COMM_WORLD
        tmp = Path(world.bcast(tempfile.mkdtemp(prefix="parvox-label-") if world.rank == 0 else None))
        if world.rank == 0:
            write_image(tmp / src, array)
        world.Barrier()
        out = io.StringIO()
        more = [] if threads is None else ["--threads", threads]
        with contextlib.redirect_stdout(out):
            code = main(["label", str(tmp / src), str(tmp / dst), "--connectivity",
                         str(connectivity), *more])
        assert code == 0
        world.Barrier()
        if world.rank == 0:
            try:
                got = read_image(tmp / dst)
            finally:
                shutil.rmtree(tmp)
            structure = ndi.generate_binary_structure(array.ndim, connectivity)
            want, n = ndi.label(array, structure=structure)
            assert np.array_equal(got, want)
            assert f"parvox label: {n} components" in out.getvalue()

    return body


# one body per case at the case's rank count; the harness runs them in its launches
for _src, _array, _dst, _nprocs, _connectivity, _threads in CASES:
    _name = f"test_label_equals_scipy_{_src.replace('.', '_')}_to_{_dst.split('.')[1]}_c{_connectivity}"
    _body = _case_body(_src, _array, _dst, _connectivity, _threads)
    _body.__name__ = _body.__qualname__ = _name
    globals()[_name] = mpi_test(ranks=(_nprocs,), timeout=60)(_body)


def test_label_launched_with_n_as_a_user_does(tmp_path):
    """One real ``parvox label ... -n 4`` (relaunched under mpiexec) from end to end."""
    src, array, dst, nprocs, connectivity, _ = CASES[1]
    write_image(tmp_path / src, array)
    proc = run_parvox("label", str(tmp_path / src), str(tmp_path / dst),
                      "--connectivity", str(connectivity), "-n", str(nprocs))
    check_ok(proc)
    want, n = ndi.label(array, structure=ndi.generate_binary_structure(array.ndim, connectivity))
    assert np.array_equal(read_image(tmp_path / dst), want)
    assert f"parvox label: {n} components" in proc.stdout


def test_bad_threads_are_refused_naming_the_argument(tmp_path, capsys, monkeypatch):
    np.save(tmp_path / "in.npy", MASK2)
    for bad in ("0", "two"):
        line = refused(["label", tmp_path / "in.npy", tmp_path / "o.npy", "--threads", bad],
                       capsys)
        assert line.startswith("parvox label: error: argument --threads: "), line
    monkeypatch.setenv("PARVOX_THREADS", "-1")
    line = refused(["label", tmp_path / "in.npy", tmp_path / "o.npy"], capsys)
    assert line.startswith("parvox label: error: argument PARVOX_THREADS: "), line
    assert not (tmp_path / "o.npy").exists()
