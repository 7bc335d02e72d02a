"""Every parallel piece of parvox.recon against one rank and against NumPy, at 1-4 ranks.

All MPI bodies of the recon tests live here, so the suite starts ``mpiexec`` once per rank
count for them: the simulation writes the same file at any rank count, ranks read their
slices of each subset, the parallel sensitivity equals one rank's and a dense-matrix
``A^T 1``, OSEM equals list-mode OSEM and binned MLEM on the dense matrix, both modes and
both progress kinds give the same image bit for bit, and rank counts agree to rounding.
Each body makes its one-rank (``COMM_SELF``) reference inside itself.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import tempfile

import numpy as np
import pytest

from parvox.decomposition import split_extent
from parvox.errors import ParameterError
from parvox.recon import (
    MU_WATER,
    ImageGrid,
    ListModeFile,
    Scanner,
    make_phantom,
    osem,
    read_header,
    sensitivity,
    simulate,
    trace_rows,
    write_events,
)
from parvox.recon.listmode import EVENT_DTYPE, HEADER_SIZE, subset_range
from parvox.testing import mpi_test

SCANNER = Scanner(24.0, 30, 5, 3.0)  # 435 crystal pairs x 25 ring pairs
GRID = ImageGrid((5, 13, 11), (3.0, 2.5, 2.5))


def _shared_dir(comm):
    path = tempfile.mkdtemp() if comm.Get_rank() == 0 else None
    return comm.bcast(path, root=0)


def _digest(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_simulation_is_the_same_at_any_rank_count():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    d = _shared_dir(comm)
    p = make_phantom("iec", GRID, radius=SCANNER.radius)
    kw = {"counts": 30_000, "seed": 7, "mu": p.mu, "randoms_fraction": 0.2, "chunk_size": 2500}
    here = os.path.join(d, "parallel.lm")
    result = simulate(p.activity, GRID, SCANNER, here, comm=comm, **kw)
    if comm.Get_rank() == 0:
        alone = os.path.join(d, "serial.lm")
        ref = simulate(p.activity, GRID, SCANNER, alone, comm=MPI.COMM_SELF, **kw)
        assert ref == result
        assert _digest(alone) == _digest(here)
        assert result.chunks == math.ceil(result.decays / 2500) > 4  # chunks over every rank
        assert result.randoms / result.events == pytest.approx(0.2, abs=0.03)
        h = read_header(here)
        assert h["n_events"] == result.events and h["n_detectors"] == SCANNER.n_detectors
        ev = np.fromfile(here, dtype=EVENT_DTYPE, offset=HEADER_SIZE)
        assert np.all(ev["d1"] < ev["d2"]) and ev["d2"].max() < SCANNER.n_detectors
        assert SCANNER.valid_pairs(ev["d1"].astype(np.int64), ev["d2"].astype(np.int64)).all()
        assert not os.path.exists(here + ".partial")
        shutil.rmtree(d)
    comm.Barrier()


@mpi_test(ranks=(1, 2, 3, 4), timeout=60)
def test_ranks_read_their_slices_of_each_subset():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    d = _shared_dir(comm)
    path = os.path.join(d, "events.lm")
    n, subsets = 1001, 7
    if rank == 0:
        write_events(path, np.arange(n), np.arange(n) + 5, n_detectors=2000)
    comm.Barrier()
    with ListModeFile(path, comm=comm) as f:
        assert f.n_events == n
        got = []
        for sub in range(subsets):
            a, b = subset_range(n, subsets, sub, rank, size)
            got.append(f.read(a, b - a)["d1"])
        mine = np.concatenate(got)
    every = comm.gather(mine, root=0)
    if rank == 0:
        # the slices of all ranks, subset by subset, tile the file exactly once
        seen = np.sort(np.concatenate(every))
        np.testing.assert_array_equal(seen, np.arange(n))
        shutil.rmtree(d)
    comm.Barrier()


@mpi_test(ranks=(1, 2, 3, 4), timeout=60)
def test_bad_files_raise_on_every_rank_naming_the_argument():
    """Rank 0 alone reads the header and writes the images; every rank raises its error."""
    from mpi4py import MPI

    from parvox.errors import AllRanksValueError
    from parvox.recon import simulate_acquisition

    comm = MPI.COMM_WORLD
    d = _shared_dir(comm)
    bad = os.path.join(d, "bad.lm")
    if comm.Get_rank() == 0:
        with open(bad, "wb") as fh:
            fh.write(b"not a list-mode file")
    comm.Barrier()
    with pytest.raises(AllRanksValueError, match=r"bad\.lm") as info:
        ListModeFile(bad, comm=comm)
    assert info.value.param == "events"
    blocked = os.path.join(bad, "out")  # a directory below a file cannot be made
    with pytest.raises(AllRanksValueError, match="cannot write the acquisition") as info:
        simulate_acquisition(blocked, make_phantom("iec", GRID, radius=SCANNER.radius),
                             SCANNER, counts=100, comm=comm)
    assert info.value.param == "OUT"
    comm.Barrier()
    if comm.Get_rank() == 0:
        shutil.rmtree(d)


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_parallel_sensitivity_equals_one_rank():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    mu = make_phantom("shepp-logan", GRID, radius=SCANNER.radius).mu
    for method in ("joseph", "siddon"):
        par = sensitivity(SCANNER, GRID, method=method, mu=mu, comm=comm)
        ref = sensitivity(SCANNER, GRID, method=method, mu=mu, comm=MPI.COMM_SELF)
        np.testing.assert_allclose(par, ref, rtol=1e-12)
        assert par.min() >= 0 and par.max() > 0


#: Every LOR of this scanner fits in a dense matrix: 66 crystal pairs x 9 ring pairs.
MICRO = Scanner(12.0, 12, 3, 3.0)
MGRID = ImageGrid((3, 6, 6), (3.0, 2.5, 2.5))


def _dense_problem(method: str, n_events: int = 3000, seed: int = 0):
    """The dense matrix of every LOR's line integrals, the LORs' factors, events drawn from
    the model of a random truth, and the LORs' detectors."""
    from scipy import sparse

    d = MICRO.detectors_per_ring
    cp, rp = MICRO.crystal_pairs(), MICRO.ring_pairs()
    t, r = np.divmod(np.arange(len(cp) * len(rp)), len(rp))
    d1, d2 = rp[r, 0] * d + cp[t, 0], rp[r, 1] * d + cp[t, 1]
    starts, ends = MICRO.lor_endpoints(d1, d2)
    rows = trace_rows(starts, ends, MGRID, method=method)
    a_line = sparse.csr_matrix((rows.weights, rows.indices, rows.indptr),
                               shape=(len(d1), MGRID.size)).toarray()
    w = MICRO.geometric_factors(starts, ends) / MGRID.voxel_volume
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0.5, 2.0, MGRID.size) * 1000
    mean = w * (a_line @ truth)
    lors = rng.choice(len(d1), size=n_events, p=mean / mean.sum())
    return a_line, w, lors, d1, d2


def _numpy_osem(a_line, sens, lors, subsets, iterations):
    """List-mode OSEM on the dense matrix, event by event (seed 000's Listing 1.1)."""
    f = (sens > 0).astype(float)
    m = len(lors)
    for _ in range(iterations):
        for sub in range(subsets):
            lo, hi = split_extent(m, subsets, sub)
            rows = a_line[lors[lo:hi]]
            proj = rows @ f
            ratio = np.where(proj > 0, 1 / np.where(proj > 0, proj, 1), 0.0)
            c = rows.T @ ratio
            f = np.where(sens > 0, f * c / np.where(sens > 0, sens, 1) * (m / (hi - lo)), 0.0)
    return f


def _numpy_mlem_binned(a_line, w, sens, lors, iterations):
    """MLEM on the histogram of the events: f <- f / a * P^T (y / P f), P = diag(w) A."""
    y = np.bincount(lors, minlength=a_line.shape[0]).astype(float)
    p = w[:, None] * a_line
    f = (sens > 0).astype(float)
    for _ in range(iterations):
        proj = p @ f
        ratio = np.where(y > 0, y / np.where(proj > 0, proj, 1), 0.0)
        f = np.where(sens > 0, f * (p.T @ ratio) / np.where(sens > 0, sens, 1), 0.0)
    return f


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_osem_equals_dense_numpy_osem_and_mlem():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    d = _shared_dir(comm)
    for method in ("siddon", "joseph"):
        a_line, w, lors, d1, d2 = _dense_problem(method)
        path = os.path.join(d, f"{method}.lm")
        if comm.Get_rank() == 0:
            write_events(path, d1[lors], d2[lors], n_detectors=MICRO.n_detectors)
        comm.Barrier()
        sens = sensitivity(MICRO, MGRID, method=method, comm=comm)
        dense_sens = (w @ a_line).reshape(MGRID.shape)
        np.testing.assert_allclose(sens, dense_sens, rtol=1e-12)
        for subsets, iterations in ((1, 3), (3, 2), (7, 1)):
            for mode in ("overlap", "blocking"):
                r = osem(path, MICRO, MGRID, sens, subsets=subsets, iterations=iterations,
                         method=method, mode=mode, chunk=97, comm=comm)
                ref = _numpy_osem(a_line, dense_sens.ravel(), lors, subsets, iterations)
                np.testing.assert_allclose(r.image.ravel(), ref, rtol=1e-10, atol=1e-12)
                if subsets == 1:
                    binned = _numpy_mlem_binned(a_line, w, dense_sens.ravel(), lors, iterations)
                    np.testing.assert_allclose(r.image.ravel(), binned, rtol=1e-9)
    if comm.Get_rank() == 0:
        shutil.rmtree(d)
    comm.Barrier()


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_modes_and_progress_give_the_same_image_and_ranks_agree():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    d = _shared_dir(comm)
    s = Scanner.preset("tiny")
    g = ImageGrid((8, 15, 17), (3.0, 2.5, 2.5))  # odd sizes
    _, y, x = g.mesh()
    act = ((x**2 + y**2 <= 15.0**2) * (1.0 + (x > 3))) * np.ones(g.shape)
    mu = np.where(act > 0, MU_WATER, 0.0).astype(np.float32)
    path = os.path.join(d, "events.lm")
    simulate(act, g, s, path, counts=60_000, seed=3, mu=mu, randoms_fraction=0.1, comm=comm)
    sens = sensitivity(s, g, mu=mu, comm=comm)
    kw = {"subsets": 5, "iterations": 2, "chunk": 211}
    blocking = osem(path, s, g, sens, mode="blocking", comm=comm, **kw)
    variants = [
        osem(path, s, g, sens, mode="overlap", comm=comm, **kw),
        osem(path, s, g, sens, mode="overlap", row_memory=1, comm=comm, **kw),  # mostly step 2
        osem(path, s, g, sens, mode="overlap", progress="thread", comm=comm, **kw),
        osem(path, s, g, sens, mode="overlap", tests=0, comm=comm, **kw),
        osem(path, s, g, sens, mode="blocking", chunk=4096, comm=comm,
             **{k: v for k, v in kw.items() if k != "chunk"}),
    ]
    for v in variants:
        np.testing.assert_array_equal(v.image, blocking.image)  # bit for bit
    single = osem(path, s, g, sens.astype(np.float32), mode="overlap", dtype=np.float32,
                  comm=comm, **kw)
    assert single.image.dtype == np.float32
    np.testing.assert_allclose(single.image, blocking.image, rtol=1e-3, atol=1e-3 *
                               blocking.image.max())
    # the parts summed in node-shared memory: the same sums grouped differently
    shared = osem(path, s, g, sens, mode="blocking", algorithm="shared", comm=comm, **kw)
    np.testing.assert_allclose(shared.image, blocking.image, rtol=1e-10, atol=1e-12)
    assert not shared.mean.column("start").any() and not shared.mean.column("wait").any()
    for im in comm.allgather(shared.image):
        np.testing.assert_array_equal(im, shared.image)
    with pytest.raises(ParameterError) as info:
        osem(path, s, g, sens, mode="overlap", algorithm="shared", comm=comm, **kw)
    assert info.value.param == "algorithm"
    if comm.Get_rank() == 0:
        alone = osem(path, s, g, sens, mode="blocking", comm=MPI.COMM_SELF, **kw)
        np.testing.assert_allclose(blocking.image, alone.image, rtol=1e-10, atol=1e-12)
        shutil.rmtree(d)
    # every rank holds the same image
    images = comm.allgather(blocking.image)
    for im in images:
        np.testing.assert_array_equal(im, images[0])
    # timers: the overlapped run spent time in the overlap phase, the blocking one did not
    over = variants[0]
    assert over.mean.column("overlap")[:-1].all() and not over.mean.column("overlap")[-1]
    assert not blocking.mean.column("overlap").any() and blocking.mean.column("allreduce").all()
    assert over.communication_overhead() > 0 and blocking.communication_overhead() > 0
    model, measured = over.model()
    assert model > 0 and measured > 0
    comm.Barrier()


@mpi_test(ranks=(1, 2, 3), timeout=120)
def test_the_postfilter_is_scipys_gaussian_of_the_reconstruction():
    """``postfilter`` (and ``osem(postfilter=)``) equals scipy.ndimage.gaussian_filter of the
    unfiltered image with sigma = FWHM / (2 sqrt(2 ln 2)) / voxel size, per axis."""
    from mpi4py import MPI
    from scipy import ndimage

    from parvox.recon import postfilter

    comm = MPI.COMM_WORLD
    d = _shared_dir(comm)
    p = make_phantom("iec", GRID, radius=SCANNER.radius)  # 5 x 13 x 11, 3 x 2.5 x 2.5 mm
    path = os.path.join(d, "events.lm")
    simulate(p.activity, GRID, SCANNER, path, counts=20_000, seed=4, mu=p.mu, comm=comm)
    sens = sensitivity(SCANNER, GRID, mu=p.mu, comm=comm)
    kw = {"subsets": 3, "iterations": 2}
    plain = osem(path, SCANNER, GRID, sens, comm=comm, **kw)
    fwhm = 4.0
    sigma = [fwhm / (2 * math.sqrt(2 * math.log(2))) / v for v in GRID.voxel_size]
    expected = ndimage.gaussian_filter(plain.image, sigma)
    np.testing.assert_allclose(postfilter(plain.image, GRID, fwhm, comm=comm), expected,
                               rtol=1e-12, atol=1e-12 * expected.max())
    filtered = osem(path, SCANNER, GRID, sens, postfilter=fwhm, comm=comm, **kw)
    assert filtered.postfilter == fwhm and plain.postfilter == 0
    np.testing.assert_allclose(filtered.image, expected, rtol=1e-12, atol=1e-12 * expected.max())
    np.testing.assert_array_equal(postfilter(plain.image, GRID, 0.0, comm=comm), plain.image)
    images = comm.allgather(filtered.image)  # every rank holds the whole filtered image
    for im in images:
        np.testing.assert_array_equal(im, images[0])
    comm.Barrier()
    if comm.Get_rank() == 0:
        shutil.rmtree(d)
