"""Coalescing: several tokens or results to one rank in one MPI message, the same results."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.dataflow import Operation, Stage, Token
from parvox.errors import ParameterError
from parvox.testing import mpi_test


def _op(size: int) -> Operation:
    return Operation(
        "many",
        split=lambda n: [Token(i % size, np.arange(i % 13, dtype=np.int32) + i) for i in range(n)],
        stages=(Stage(lambda a: a * 2, "double"), Stage(lambda a: int(a.sum()), "sum")),
        merge=lambda acc, r: [*acc, r],
        init=lambda n: [],
        finish=sorted,
    )


def _want(n: int) -> list[int]:
    return sorted(int((np.arange(i % 13) + i).sum() * 2) for i in range(n))


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_results_equal_with_and_without_coalescing_and_fewer_messages_go():
    from mpi4py import MPI

    from parvox.dataflow import Dataflow

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    counts = {}
    for coalesce, delay in [(1, 0.0), (8, 0.002)]:
        with Dataflow([_op(size)], window=8, coalesce=coalesce, coalesce_delay=delay) as flow:
            if comm.Get_rank() == 0:
                futures = [flow.submit("many", 60 + k) for k in range(3)]
                for k, fut in enumerate(futures):
                    assert fut.result(timeout=60) == _want(60 + k)
            comm.Barrier()
            counts[coalesce] = comm.allreduce(np.array([flow.mpi_sends, flow.messages_sent]))
    if size > 1:
        off, on = counts[1], counts[8]
        assert off[0] == off[1]  # one MPI send per message without coalescing
        assert on[0] < on[1]  # several messages per send with it
        assert on[0] < off[0]


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [({"coalesce": 0}, "coalesce"), ({"coalesce": 2.0}, "coalesce"),
     ({"coalesce_delay": -1.0}, "coalesce_delay"), ({"coalesce_delay": "x"}, "coalesce_delay")],
)
def test_bad_coalescing_names_the_argument(kwargs, param):
    from parvox.dataflow import Dataflow

    with pytest.raises(ParameterError) as info:
        Dataflow([_op(1)], **kwargs)
    assert info.value.param == param
