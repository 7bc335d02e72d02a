"""exchange_by_destination at 1-4 ranks: every rank draws the same seeded data of all ranks, so
the rows each rank must receive (by source rank, each source's order kept) follow from NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import mpi_test


def _rank_data(seed: int, r: int, n: int, size: int, dest=None):
    """Rank ``r``'s destinations and parallel arrays of several dtypes and row shapes."""
    rng = np.random.default_rng(seed * 100 + r)
    d = rng.integers(0, size, n) if dest is None else np.full(n, dest)
    rec = np.zeros(n, [("a", np.int8), ("b", np.float32, (2,))])
    rec["a"] = rng.integers(-100, 100, n)
    rec["b"] = rng.random((n, 2))
    arrays = [
        rng.integers(-(2**40), 2**40, n),                 # int64
        rng.random(n).astype(np.float32),
        rng.integers(0, 255, (n, 3)).astype(np.uint8),    # rows of 3
        rng.random(n) > 0.5,                              # bool
        rec,                                              # structured
        rng.random((n, 2, 2)) + 1j,                       # complex rows of 2x2
    ]
    return d, arrays


def _expected(data, rank: int):
    """What ``rank`` receives: from each source in rank order, that source's rows for it."""
    parts, sources = [[] for _ in data[0][1]], []
    for s, (d, arrays) in enumerate(data):
        sel = d == rank
        for k, a in enumerate(arrays):
            parts[k].append(a[sel])
        sources.append(np.full(int(sel.sum()), s))
    return [np.concatenate(p) for p in parts], np.concatenate(sources)


@mpi_test(timeout=180)
def test_every_rank_receives_its_rows_in_source_order():
    from mpi4py import MPI

    from parvox.collectives import exchange_by_destination

    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    scenarios = [  # (seed, rows per rank, fixed destination per rank or None)
        (1, [11, 0, 37, 5][:size], None),               # random, a rank with nothing
        (2, [0] * size, None),                          # nobody sends anything
        (3, [257] + [0] * (size - 1), [size - 1] + [None] * (size - 1)),  # one sends all
        (4, [3] * size, list(range(size))),             # everyone to itself
        (5, [1000 + r for r in range(size)], None),     # larger
    ]
    for seed, ns, fixed in scenarios:
        fixed = fixed or [None] * size
        data = [_rank_data(seed, s, ns[s], size, fixed[s]) for s in range(size)]
        d, arrays = data[rank]
        *got, src = exchange_by_destination(d, *arrays, comm=comm, sources=True)
        want, want_src = _expected(data, rank)
        assert len(got) == len(arrays)
        for g, w, a in zip(got, want, arrays, strict=True):
            assert g.dtype == a.dtype and g.shape == w.shape, (seed, g.dtype, g.shape, w.shape)
            np.testing.assert_array_equal(g, w, err_msg=f"seed {seed}")
        assert src.dtype == np.int64
        np.testing.assert_array_equal(src, want_src)
        # without sources, and a list as dest
        plain = exchange_by_destination(d.tolist(), arrays[0], comm=comm)
        assert len(plain) == 1
        np.testing.assert_array_equal(plain[0], want[0])
    # no arrays at all: only where the rows came from
    data = [_rank_data(9, s, 5, size) for s in range(size)]
    (src,) = exchange_by_destination(data[rank][0], sources=True)
    np.testing.assert_array_equal(src, _expected(data, rank)[1])


@mpi_test(timeout=120)
def test_bad_input_on_one_rank_raises_on_every_rank():
    from mpi4py import MPI

    from parvox.collectives import exchange_by_destination
    from parvox.errors import ParameterError

    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    last = size - 1
    good = np.arange(4) % size
    cases = [  # (param, dest, arrays) on the last rank; the others pass good input
        ("dest", np.array([0, size, 0, 0]), [np.arange(4)]),
        ("dest", np.array([0, -1, 0, 0]), [np.arange(4)]),
        ("dest", np.array([0.0, 1.0, 0.0, 0.0]), [np.arange(4)]),
        ("dest", good.reshape(2, 2), [np.arange(4)]),
        ("arrays", good, [np.arange(3)]),
        ("arrays", good, [np.array(1)]),
        ("arrays", good, [np.array([None] * 4)]),
    ]
    if size > 1:  # differ from a peer's
        cases += [
            ("arrays", good, [np.arange(4, dtype=np.int32)]),  # dtype
            ("arrays", good, [np.arange(8).reshape(4, 2)]),    # row shape
            ("arrays", good, [np.arange(4), np.arange(4)]),    # number of arrays
        ]
    for param, dest, arrays in cases:
        mine = (dest, arrays) if rank == last else (good, [np.arange(4)])
        with pytest.raises(ParameterError) as info:
            exchange_by_destination(mine[0], *mine[1], comm=comm)
        assert info.value.param == param, (param, str(info.value))
        assert param in str(info.value)
    # the communicator is still in step
    (got,) = exchange_by_destination(np.full(2, (rank + 1) % size), np.full(2, rank), comm=comm)
    np.testing.assert_array_equal(got, np.full(2, (rank - 1) % size))
