"""Placement: stages run on the ranks a configuration map names, results equal the serial run."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.dataflow import Operation, Stage, Token
from parvox.dataflow.operation import serial
from parvox.dataflow.placement import place
from parvox.errors import ParameterError
from parvox.testing import mpi_test


def _where() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank() if MPI.Is_initialized() else -1


def _op(size: int) -> Operation:
    """Token i to rank i % size; 'load' makes 11 + i values, 'scale' and 'sum' follow, each
    recording the rank it ran on."""
    return Operation(
        "chain",
        split=lambda n: [Token(i % size, np.int64(i)) for i in range(n)],
        stages=(
            Stage(lambda i: {"i": int(i), "x": np.arange(11.0 + int(i)), "at": [_where()]}, "load"),
            Stage(lambda p: p | {"x": p["x"] * 3, "at": p["at"] + [_where()]}, "scale", queue=1),
            Stage(lambda p: (p["i"], float(p["x"].sum()), p["at"] + [_where()]), "sum"),
        ),
        merge=lambda acc, r: acc | {r[0]: r[1:]},
        init=lambda n: {},
    )


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_placed_stages_run_where_the_map_says_and_equal_the_serial_run():
    from mpi4py import MPI

    from parvox.dataflow import Dataflow

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    last = size - 1
    placement = {"chain": {"scale": {"rank": last, "threads": 2}}, "chain/sum": 0}
    with Dataflow([_op(size)], window=2, placement=placement) as flow:
        assert flow.ops["chain"].stages[1].rank == last
        if comm.Get_rank() == 0:
            got = flow.run("chain", 23)
            want = {i: r[0] for i, r in serial(_op(size), 23).items()}
            assert {i: v[0] for i, v in got.items()} == want
            for i, (_, at) in got.items():
                assert at == [i % size, last, 0]
            assert max(flow.max_inflight) <= 2  # the window counts the token's destination


def test_bad_placements_name_the_key():
    op = _op(2)
    for bad, key in [
        ({"chain/nope": 0}, "chain/nope"),
        ({"other/load": 0}, "other/load"),
        ({"chain/load": 2}, "chain/load"),
        ({"chain/load": -1}, "chain/load"),
        ({"chain/load": {"threads": 0}}, "chain/load"),
        ({"chain/load": {"ranks": 1}}, "chain/load"),
        ({"chain": 3}, "chain"),
    ]:
        with pytest.raises(ParameterError) as info:
            place([op], bad, 2)
        assert info.value.param == key
    with pytest.raises(ParameterError) as info:
        Stage(abs, rank=-2)
    assert info.value.param == "rank"
    assert place([op], {"chain/load": "dest"}, 2)[0].stages[0].rank is None
