"""parvox.dataflow: split / pipelined stages / merge over MPI at 1-4 ranks."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.dataflow import Operation, Stage, Token, pack, unpack
from parvox.testing import mpi_test


def _sum_op(size: int, candidates: bool = False) -> Operation:
    """Tokens i carry arange(i, i + 7 + i % 5); stage 1 squares, stage 2 sums per token."""

    def split(n: int):
        for i in range(n):
            dest = tuple(range(size)) if candidates else (i * 7) % size
            yield Token(dest, {"i": i, "x": np.arange(i, i + 7 + i % 5, dtype=np.float64)})

    def square(p):
        return {"i": p["i"], "x": p["x"] ** 2}

    def total(p):
        from mpi4py import MPI

        return (p["i"], np.array([p["x"].sum(), MPI.COMM_WORLD.Get_rank()]))

    def merge(acc, r):
        acc[r[0]] = r[1]
        return acc

    return Operation("sumsq", split, (Stage(square, "square", queue=2), Stage(total, "sum")),
                     merge, init=lambda n: {})


def _expected(n: int) -> dict[int, float]:
    return {i: float((np.arange(i, i + 7 + i % 5, dtype=np.float64) ** 2).sum()) for i in range(n)}


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_split_stages_merge_against_serial():
    from mpi4py import MPI

    from parvox.dataflow import Dataflow

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    with Dataflow([_sum_op(size)], window=3) as flow:
        if comm.Get_rank() == 0:
            got = flow.run("sumsq", 41)
            want = _expected(41)
            assert sorted(got) == sorted(want)  # exactly one result per token
            for i, (value, where) in got.items():
                assert value == want[i]
                assert where == (i * 7) % size  # ran on the rank the token named
            assert max(flow.max_inflight) <= 3


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_every_rank_is_an_origin_with_concurrent_requests():
    from mpi4py import MPI

    from parvox.dataflow import Dataflow

    comm = MPI.COMM_WORLD
    with Dataflow([_sum_op(comm.Get_size())], window=2, max_requests=4) as flow:
        futures = [flow.submit("sumsq", 5 + k + comm.Get_rank()) for k in range(6)]
        for k, fut in enumerate(futures):
            n = 5 + k + comm.Get_rank()
            got = fut.result(timeout=60)
            assert {i: v for i, (v, _) in got.items()} == _expected(n)


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_shortest_queue_spreads_tokens_within_window():
    from mpi4py import MPI

    from parvox.dataflow import Dataflow

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    with Dataflow([_sum_op(size, candidates=True)], window=2) as flow:
        if comm.Get_rank() == 0:
            got = flow.run("sumsq", 60)
            assert {i: v for i, (v, _) in got.items()} == _expected(60)
            used = {int(where) for _, where in got.values()}
            assert used == set(range(size))  # every candidate got work
            assert max(flow.max_inflight) <= 2
            assert all(m >= 1 for m in flow.max_inflight)


def _failing_op(size: int) -> Operation:
    def boom(x):
        if int(x[0]) == 3:
            raise OSError("disk on fire")
        return x

    return Operation("fail", lambda n: [Token(i % size, np.array([i])) for i in range(n)],
                     (Stage(boom, "read"), Stage(lambda x: x * 2, "compute")),
                     lambda acc, r: acc + int(r[0]), init=lambda n: 0)


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_stage_error_names_rank_and_stage_and_runtime_goes_on():
    from mpi4py import MPI

    from parvox.dataflow import Dataflow, DataflowError

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    with Dataflow([_failing_op(size), _sum_op(size)]) as flow:
        if comm.Get_rank() == 0:
            with pytest.raises(DataflowError) as info:
                flow.run("fail", 8)
            err = info.value
            assert (err.rank, err.stage, err.kind) == (3 % size, "read", "OSError")
            assert "disk on fire" in str(err)
            assert flow.run("fail", 3) == 2 * (0 + 1 + 2)
            assert {i: v for i, (v, _) in flow.run("sumsq", 9).items()} == _expected(9)


@mpi_test(ranks=(2, 3), timeout=120)
def test_heartbeat_reports_every_rank():
    import time

    from mpi4py import MPI

    from parvox.dataflow import Dataflow

    comm = MPI.COMM_WORLD
    with Dataflow([_sum_op(comm.Get_size())], status=lambda: {"answer": 42}) as flow:
        if comm.Get_rank() == 0:
            flow.start_heartbeat(0.05)
            deadline = time.monotonic() + 30
            while len(flow.rank_status) < comm.Get_size() - 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sorted(flow.rank_status) == list(range(1, comm.Get_size()))
            assert all(s["answer"] == 42 for s in flow.rank_status.values())
            assert flow.silent_ranks(after=20.0) == {}


@mpi_test(ranks=(1, 2), timeout=120)
def test_peer_state_reads_are_snapshots_while_ranks_are_marked_dead():
    import threading

    from mpi4py import MPI

    from parvox.dataflow import Dataflow

    comm = MPI.COMM_WORLD
    with Dataflow([_sum_op(comm.Get_size())]) as flow:
        if comm.Get_rank() == 0:
            flow.start_heartbeat(0.001)
            stop = threading.Event()
            errors = []

            def mark() -> None:  # the watchdog's and the heartbeat's writes
                for r in range(comm.Get_size(), comm.Get_size() + 20000):
                    flow.mark_dead(r)
                stop.set()

            def read() -> None:  # the HTTP handlers' reads
                try:
                    while not stop.is_set():
                        flow.silent_ranks(60.0)
                        len(flow.dead), len(flow.rank_status), len(flow.last_seen)
                except Exception as exc:
                    errors.append(exc)
                    stop.set()

            threads = [threading.Thread(target=read) for _ in range(3)]
            threads.append(threading.Thread(target=mark))
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == []
            silent = flow.silent_ranks(60.0)
            assert len(silent) == 20000 and set(silent.values()) == {float("inf")}
            dead = flow.dead
            flow.mark_dead(-1)
            assert -1 not in dead and -1 in flow.dead  # a snapshot, not a live view


def _stuck_op(release) -> Operation:
    """Every token goes to the last rank, whose stage waits until ``release`` is set."""

    def stage(x):
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == MPI.COMM_WORLD.Get_size() - 1:
            release.wait(60)
        return x

    def split(n):
        from mpi4py import MPI

        return [Token(MPI.COMM_WORLD.Get_size() - 1, np.array([i])) for i in range(n)]

    return Operation("stuck", split, (Stage(stage),), lambda acc, r: acc + 1, init=lambda n: 0)


@mpi_test(ranks=(2,), timeout=120)
def test_a_request_without_progress_times_out_instead_of_waiting_forever():
    import threading
    import time

    from mpi4py import MPI

    from parvox.dataflow import Dataflow, DataflowTimeout

    comm = MPI.COMM_WORLD
    release = threading.Event()
    with Dataflow([_stuck_op(release)], window=3) as flow:
        if comm.Get_rank() == 0:
            t0 = time.monotonic()
            with pytest.raises(DataflowTimeout, match="2 of 2 results missing"):
                flow.run("stuck", 2, timeout=0.5)  # both tokens sent, no result comes
            with pytest.raises(DataflowTimeout, match="no room to send to rank 1"):
                flow.run("stuck", 2, timeout=0.5)  # the window (3) fills with the first token
            assert time.monotonic() - t0 < 30
            comm.send("release", dest=1)
        else:
            assert comm.recv(source=0) == "release"
            release.set()


@mpi_test(ranks=(2, 3), timeout=120)
def test_close_receives_late_results_instead_of_leaving_them_to_the_next_communicator():
    """Results that come after their request timed out, one small and one large, are received
    by close(): nothing is left on the freed communicator, where MPICH would hand it to the
    next ``Dup`` (it reuses the context id), and the large send does not hang the close."""
    import threading
    import time

    from mpi4py import MPI

    from parvox.dataflow import Dataflow, DataflowTimeout

    comm = MPI.COMM_WORLD
    last = comm.Get_size() - 1
    release = threading.Event()

    def late(n):
        release.wait(60)
        time.sleep(0.3)  # the results leave while rank 0 is closing
        return np.full(int(n[0]), 1000.0)

    op = Operation(
        "late",
        split=lambda sizes: [Token(last, np.array([n])) for n in sizes],
        stages=(Stage(late),),
        merge=lambda acc, r: acc + float(r.sum()),
        init=lambda sizes: 0.0,
    )
    with Dataflow([op], window=4) as flow:
        if comm.Get_rank() == 0:
            with pytest.raises(DataflowTimeout, match="2 of 2 results missing"):
                flow.run("late", [1, 200_000], timeout=0.3)
            comm.send("release", dest=last)
        elif comm.Get_rank() == last:
            assert comm.recv(source=0) == "release"
            release.set()
    assert flow.pool.stats.held_bytes == 0
    after = comm.Dup()
    try:
        comm.Barrier()
        time.sleep(0.3)
        assert not after.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG), "a message outlived the runtime"
        comm.Barrier()
    finally:
        after.Free()


@mpi_test(ranks=(2, 3), timeout=60)
def test_close_stops_the_serving_ranks_when_rank_0_leaves_before_its_stop_all():
    """Rank 0 fails inside the runtime's ``with`` (before it calls ``stop_all``) while the
    other ranks serve: the close still ends their ``serve_forever`` (it hung in the barrier),
    and the error reaches rank 0."""
    from mpi4py import MPI

    from parvox.dataflow import Dataflow

    comm = MPI.COMM_WORLD
    op = Operation("echo", split=lambda x: [Token(comm.Get_size() - 1, x)],
                   stages=(Stage(lambda x: x),), merge=lambda acc, r: r, init=lambda x: None)
    failed = False
    try:
        with Dataflow([op]) as flow:
            if comm.Get_rank() == 0:
                assert flow.run("echo", 7) == 7
                raise LookupError("the serving rank fails before its stop_all")
            flow.serve_forever()
    except LookupError:
        failed = True
    assert failed == (comm.Get_rank() == 0)
    assert flow.pool.stats.held_bytes == 0


def test_wire_roundtrip_keeps_arrays_and_small_objects():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.empty((0, 3), dtype=np.int64)
    head, payload = unpack(pack({"k": 1}, ("x", [a, {"b": b, "n": 5}], 2.5)))
    assert head == {"k": 1}
    assert payload[0] == "x" and payload[2] == 2.5
    np.testing.assert_array_equal(payload[1][0], a)
    assert payload[1][1]["b"].shape == (0, 3) and payload[1][1]["n"] == 5
    assert payload[1][0].ctypes.data % 16 == 0


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [({"dest": "0"}, "dest"), ({"dest": ()}, "dest")],
)
def test_bad_token(kwargs, word):
    with pytest.raises((TypeError, ValueError), match=word):
        Token(payload=None, **kwargs)


def test_bad_operation_and_stage():
    with pytest.raises(ValueError, match="stages"):
        Operation("x", lambda r: [], (), lambda a, r: a)
    with pytest.raises(ValueError, match="threads"):
        Stage(abs, threads=0)
    with pytest.raises(ValueError, match="queue"):
        Stage(abs, queue=0)
    with pytest.raises(TypeError, match="fn"):
        Stage(3)  # type: ignore[arg-type]


@mpi_test(ranks=(2, 3), timeout=120)
def test_message_buffers_come_from_the_pool_and_are_freed_at_close():
    """Large results travel in pooled buffers, reused from one message to the next; the
    runtime's pool holds nothing once it is closed; the tags are the DATAFLOW block's."""
    from mpi4py import MPI

    from parvox.dataflow import Dataflow
    from parvox.dataflow import runtime as rt
    from parvox.tags import DATAFLOW

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    n = 40
    big = 50_000  # float64: 400 kB a result, above the pool's threshold

    op = Operation(
        "big",
        split=lambda k: [Token(1 + i % (size - 1), np.array([i])) for i in range(k)],
        stages=(Stage(lambda a: np.full(big, float(a[0]) + 0.5)),),
        merge=lambda acc, r: acc + float(r.sum()),
        init=lambda k: 0.0,
    )
    flow = Dataflow([op], window=2)
    try:
        if comm.Get_rank() == 0:
            got = flow.run("big", n)
            assert got == sum((i + 0.5) * big for i in range(n))
        comm.Barrier()
        stats = flow.pool.stats
        if comm.Get_rank() == 0:  # received n results into pooled buffers
            assert stats.allocated + stats.reused >= n and stats.reused >= n // 2
        else:  # sent its results from pooled buffers
            mine = sum(1 for i in range(n) if 1 + i % (size - 1) == comm.Get_rank())
            assert stats.allocated + stats.reused >= mine and stats.reused >= 1
    finally:
        flow.close()
    assert flow.pool.stats.held_bytes == 0
    assert {rt._TAG_TOKEN, rt._TAG_RESULT, rt._TAG_CTRL} == {DATAFLOW.tag(k) for k in range(3)}


@mpi_test(ranks=(2, 3, 4), timeout=120)
def test_large_results_built_in_the_pool_go_uncopied_and_come_back_to_it():
    """A stage that writes its large result into ``pool.take_message`` (as the slice
    server's extraction does) sends it as it is, the header written in front: no buffer is
    taken to copy it into, the result's buffer comes back to the pool once sent, and the
    origin gets the values exactly, with and without coalescing (which copies the messages
    it joins)."""
    from mpi4py import MPI

    from parvox.dataflow import Dataflow
    from parvox.dataflow.pool import BufferPool

    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    n, big = 24, 30_011  # float32 values: 120 kB a result, an odd length (padding follows)
    for coalesce in (1, 4):
        pool = BufferPool()

        def fill(a, pool=pool):
            out = pool.take_message(4 * big).view(np.float32)
            out[:] = np.arange(big, dtype=np.float32) + float(a[0])
            return out

        op = Operation(
            "pooled",
            split=lambda k: [Token(1 + i % (size - 1), np.array([i])) for i in range(k)],
            stages=(Stage(fill),),
            merge=lambda acc, r: [*acc, r.copy()],
            init=lambda k: [],
        )
        with Dataflow([op], window=2, coalesce=coalesce, pool=pool) as flow:
            if rank == 0:
                got = sorted(flow.run("pooled", n), key=lambda r: float(r[0]))
                for i, r in enumerate(got):
                    np.testing.assert_array_equal(r, np.arange(big, dtype=np.float32) + i)
            comm.Barrier()
            if rank > 0:  # each result's buffer came back once sent: later ones reuse it
                mine = sum(1 for i in range(n) if 1 + i % (size - 1) == rank)
                taken = pool.stats.allocated + pool.stats.reused
                # one buffer a result, none for its sending (coalesced: copies where joined)
                assert taken == mine if coalesce == 1 else taken >= mine
                assert pool.stats.reused >= 1
        assert pool.stats.held_bytes == 0
