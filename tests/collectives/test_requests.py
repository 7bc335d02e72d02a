"""The request engine: no lock held while a wait blocks, waits with a deadline never spin,
a collective that times out gives its messages up, typed requests."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from parvox.testing import mpi_test


def _stuck(comm, mode: str):
    """A started collective whose receive never matches (nobody sends to it)."""
    from parvox.collectives import context
    from parvox.collectives._launch import start_schedule
    from parvox.collectives.schedule import Schedule

    s = Schedule("stuck")
    s.recv(np.zeros(4), 0)
    return start_schedule(context(comm), s, None, mode, None)


@pytest.mark.parametrize("mode", ["test", "none", "thread"])
def test_a_timed_out_collective_gives_its_messages_up(monkeypatch, mode):
    from mpi4py import MPI

    from parvox import collectives as coll
    from parvox.collectives import _engine

    if mode == "thread" and MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        pytest.skip("no MPI_THREAD_MULTIPLE")
    pauses: list[float] = []
    real_sleep = _engine.time.sleep

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(_engine.time, "sleep", sleep)
    comm = MPI.COMM_SELF.Dup()
    req = _stuck(comm, mode)
    assert not req.test() or mode == "none"
    with pytest.raises(coll.CollectiveTimeout, match=r"stuck: not complete after 0\.05 s"):
        req.wait(timeout=0.05)
    assert req.done and req._reqs == []  # the receive was cancelled and completed
    with pytest.raises(coll.CollectiveTimeout):
        req.wait()  # the error stays
    if mode != "thread":
        assert pauses and min(pauses) > 0  # slept between tests: never a sleep(0) spin
        assert pauses == sorted(pauses) or max(pauses) == _engine._LAST_PAUSE
    assert _engine.ENGINE.pending() == 0
    # the communicator is still usable
    out = coll.allreduce(np.arange(3.0), comm=comm, algorithm="recursive_doubling", timeout=5)
    np.testing.assert_array_equal(out, np.arange(3.0))
    comm.Free()


def test_requests_are_typed_and_speak_mpi4py():
    from parvox import collectives as coll

    req = coll.ibarrier()
    assert isinstance(req, coll.BaseRequest)
    assert req.wait() is None and req.Wait() is True and req.Test() is True
    r2 = coll.iallreduce(np.ones(2))
    assert r2.wait().tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="progress"):
        coll.allreduce(np.ones(2), progress="test")  # type: ignore[call-arg]
    assert "progress" not in str(__import__("inspect").signature(coll.allreduce))


@mpi_test(ranks=(2,), timeout=120)
def test_other_threads_start_and_test_while_a_wait_blocks():
    """Rank 1 joins only after rank 0's main thread has started and tested a collective
    while another thread of rank 0 was blocked waiting: with a lock held across the wait,
    the job deadlocks (and the harness reports the hang)."""
    import time

    from mpi4py import MPI

    from parvox import collectives as coll
    from parvox.collectives._engine import ENGINE

    world = MPI.COMM_WORLD
    r = world.Get_rank()
    x = np.full(5, r + 1.0)
    coll.configure(world)  # the private duplicate is made collectively, before the test
    if r == 0:
        first = coll.iallreduce(x, algorithm="recursive_doubling", progress="test")
        waiter = threading.Thread(target=first.wait)
        waiter.start()
        while not ENGINE._busy.locked():  # the waiter is inside the engine, waiting
            time.sleep(0.001)
        second = coll.ibarrier(algorithm="dissemination", progress="test")
        assert second.test() is False
        world.send("started and tested", dest=1, tag=7)
        second.wait()
        waiter.join()
        np.testing.assert_array_equal(first.result, np.full(5, 3.0))
    else:
        assert world.recv(source=0, tag=7) == "started and tested"
        first = coll.iallreduce(x, algorithm="recursive_doubling", progress="test")
        second = coll.ibarrier(algorithm="dissemination", progress="test")
        coll.waitall([second, first])
        np.testing.assert_array_equal(first.result, np.full(5, 3.0))


@mpi_test(ranks=(2, 3), timeout=120)
def test_waits_in_any_order_with_deadlines_and_threads():
    """Many collectives outstanding, waited with timeouts from two threads per rank."""
    from mpi4py import MPI

    from parvox import collectives as coll

    world = MPI.COMM_WORLD
    p, r = world.Get_size(), world.Get_rank()
    xs = [np.full(7, float(i)) for i in range(p)]
    reqs = [coll.iallreduce(xs[r], algorithm=a, progress="test", timeout=60)
            for a in ("ring", "recursive_doubling", "binomial", "native")]
    reqs += [coll.iscan(xs[r], algorithm="recursive_doubling", progress="none", timeout=60)]
    half = len(reqs) // 2
    other = threading.Thread(target=coll.waitall, args=(reqs[half:],))
    other.start()
    for q in reversed(reqs[:half]):
        q.wait()
    other.join()
    for q in reqs[:-1]:
        np.testing.assert_array_equal(q.result, np.full(7, p * (p - 1) / 2))
    np.testing.assert_array_equal(reqs[-1].result, np.full(7, r * (r + 1) / 2))


@mpi_test(ranks=(2, 3), timeout=120)
def test_rounds_count_the_schedule_a_request_runs():
    """The unsegmented ring is P - 1 reduce-scatter rounds, P - 1 allgather rounds and the last
    reduction; a segmented one has a round per segment; MPI's own is one opaque round."""
    from mpi4py import MPI

    from parvox import collectives as coll
    from parvox.collectives.alg_reduce import SEGMENT_BYTES
    from parvox.collectives.requests import CompletedRequest

    p = MPI.COMM_WORLD.Get_size()
    small = coll.iallreduce(np.ones(7), algorithm="ring", progress="test", timeout=60)
    assert small.rounds == 2 * p - 1
    big = coll.iallreduce(np.ones(4 * p * SEGMENT_BYTES // 8), algorithm="ring", progress="test",
                          timeout=60)
    assert big.rounds > 2 * p  # segments pipelined: more rounds than the unsegmented ring
    native = coll.iallreduce(np.ones(7), algorithm="native", timeout=60)
    assert native.rounds == 1
    for q in (small, big, native):
        np.testing.assert_array_equal(q.wait(), np.full(q.result.shape, float(p)))
    assert small.rounds == 2 * p - 1  # still what was scheduled once the request is over
    assert CompletedRequest(None).rounds == 0


@mpi_test(ranks=(2,), timeout=120)
def test_a_timed_out_native_collective_is_kept_until_mpi_completes_it():
    """MPI forbids cancelling its collectives: the request fails, the MPI request and its
    buffers are kept (and progressed) until the late rank joins."""
    from mpi4py import MPI

    from parvox import collectives as coll
    from parvox.collectives._engine import ENGINE

    world = MPI.COMM_WORLD
    r = world.Get_rank()
    comm = world.Dup()
    coll.configure(comm)
    if r == 0:
        req = coll.iallreduce(np.ones(3), algorithm="native", comm=comm)
        with pytest.raises(coll.CollectiveTimeout, match="allreduce: not complete after"):
            req.wait(timeout=0.2)
        assert ENGINE.pending() == 1  # kept
        world.send("late", dest=1, tag=3)
        ENGINE.wait_until(lambda: ENGINE.pending() == 0, None)
    else:
        assert world.recv(source=0, tag=3) == "late"
        np.testing.assert_array_equal(
            coll.allreduce(np.ones(3), algorithm="native", comm=comm), np.full(3, 2.0))
    comm.Free()


def test_test_calls_are_two_per_round_of_the_longest_schedule():
    from parvox import collectives as coll
    from parvox.collectives.requests import CompletedRequest

    ring = coll.iallreduce(np.ones(5), algorithm="ring", progress="test", timeout=60)
    native = coll.iallreduce(np.ones(5), algorithm="native", timeout=60)
    assert coll.test_calls(native) == 2
    assert coll.test_calls([native, ring]) == 2 * max(ring.rounds, 1)
    assert coll.test_calls(CompletedRequest(None)) == 0
    assert coll.test_calls(CompletedRequest(None), at_least=8) == 8
    assert coll.test_calls([], at_least=3) == 3
    coll.waitall([ring, native])
