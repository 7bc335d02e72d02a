"""Operator parsing and the serial reference (no MPI needed)."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.collectives.algorithms import choose, parse_algorithm
from parvox.collectives.ops import Op, parse_op, reduce_serial
from parvox.collectives.progress import overlap, parse_progress


def test_names_ufuncs_and_callables():
    assert parse_op("SUM").name == "sum" and parse_op("sum").commutative
    assert parse_op(np.maximum).name == "max"
    assert parse_op(Op(np.add, commutative=True)).name == "sum"
    sub = parse_op(np.subtract)
    assert not sub.commutative and sub.mpi_name is None
    f = parse_op(lambda a, b: a)
    assert not f.commutative
    assert parse_op(Op(lambda a, b: a + b, commutative=True)).commutative


def test_mpi_builtin_ops():
    from mpi4py import MPI

    assert parse_op(MPI.MAX).name == "max"
    assert parse_op(MPI.BXOR).mpi_name == "BXOR"
    with pytest.raises(ValueError, match="op"):
        parse_op(MPI.MAXLOC)


def test_bad_ops_name_the_argument():
    with pytest.raises(ValueError, match="op"):
        parse_op("median")
    with pytest.raises(TypeError, match="op"):
        parse_op(3)
    with pytest.raises(ValueError, match="op"):
        parse_op(np.sqrt)


def test_reduce_serial_is_left_to_right():
    xs = [np.array([2.0]), np.array([3.0]), np.array([5.0])]
    assert reduce_serial(xs, np.subtract)[0] == (2.0 - 3.0) - 5.0
    assert reduce_serial(xs, "prod")[0] == 30.0


def test_choose_is_valid_for_every_operation():
    from parvox.collectives.algorithms import ALGORITHMS

    for op, algs in ALGORITHMS.items():
        for nbytes in (0, 100, 1 << 20, 1 << 26):
            for size in (1, 2, 3, 4, 8):
                for comm_op in (True, False):
                    a = choose(op, nbytes, size, commutative=comm_op, native_op=comm_op)
                    assert a in algs or (size == 1 and a == "linear") or \
                        (size == 1 and op == "barrier")
                    if not comm_op and op in ("reduce", "allreduce", "reduce_scatter"):
                        assert a not in ("ring", "rabenseifner")
    with pytest.raises(ValueError, match=r"algorithm: bcast offers .* got 'pairwise'"):
        parse_algorithm("bcast", "pairwise")


def test_algorithm_choices_by_operation():
    from parvox.collectives.algorithms import ALGORITHMS, TABLE, parse_choice

    # the table is the catalogue: every listed algorithm has a builder and vice versa
    assert {(op, a) for op, algs in ALGORITHMS.items() for a in algs} == set(TABLE)
    assert parse_algorithm("scatter", {"allreduce": "ring"}) == "auto"
    assert parse_algorithm("allreduce", {"allreduce": "ring"}) == "ring"
    with pytest.raises(ValueError, match=r"algorithm: scatter offers .* got 'ring'"):
        parse_algorithm("scatter", {"scatter": "ring"})
    with pytest.raises(ValueError, match="algorithm: expected 'auto' or one of"):
        parse_choice("fastest")
    with pytest.raises(ValueError, match="algorithm: gather offers"):
        parse_choice({"gather": "ring"})
    with pytest.raises(TypeError, match="algorithm"):
        parse_choice(3)  # type: ignore[arg-type]


def test_mpi_accepts_follows_the_standard():
    for name, ok, bad in (("sum", "iufc", "b"), ("max", "iuf", "bc"), ("lor", "iub", "fc"),
                          ("band", "iu", "bfc")):
        rop = parse_op(name)
        for kind, dt in (("i", np.int32), ("u", np.uint8), ("f", np.float64),
                         ("c", np.complex128), ("b", np.bool_)):
            assert rop.mpi_accepts(np.dtype(dt)) == (kind in ok), (name, kind)
            assert kind not in bad or not rop.mpi_accepts(np.dtype(dt))
    assert not parse_op(np.subtract).mpi_accepts(np.dtype(np.float64))


def test_overlap_spreads_tests_evenly():
    from parvox.collectives.requests import BaseRequest

    calls = []
    done: list[int] = []

    class Probe(BaseRequest):
        def test(self):
            calls.append(len(done))
            return False

    overlap(Probe(None), done.append, range(12), tests=3)
    assert calls == [3, 6, 9]
    with pytest.raises(ValueError, match="tests"):
        overlap(None, done.append, range(2), tests=-1)
    with pytest.raises(ValueError, match="progress"):
        parse_progress("always")


def test_progress_thread_needs_thread_multiple(monkeypatch):
    from mpi4py import MPI

    from parvox.collectives.progress import ProgressThread, ProgressUnavailable

    monkeypatch.setattr(MPI, "Query_thread", lambda: MPI.THREAD_SERIALIZED)
    with pytest.raises(ProgressUnavailable, match="MPI_THREAD_MULTIPLE"):
        ProgressThread()
