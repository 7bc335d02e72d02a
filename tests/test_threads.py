"""parvox.threads: the thread count from the argument or $PARVOX_THREADS, and the team."""

from __future__ import annotations

import sys
import threading

import pytest

from parvox.errors import ParameterError
from parvox.threads import THREADS_ENV, ThreadTeam, native_name, resolve_threads, set_native_name


def _team_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("parvox-team")]


def test_the_argument_wins_then_the_environment_then_one(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert resolve_threads() == 1 and resolve_threads(None) == 1
    assert resolve_threads(5) == 5 and resolve_threads(3.0) == 3
    monkeypatch.setenv(THREADS_ENV, " 4 ")
    assert resolve_threads() == 4 and resolve_threads(2) == 2
    monkeypatch.setenv(THREADS_ENV, "")
    assert resolve_threads() == 1


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True, None])
def test_bad_counts_name_the_argument(bad, monkeypatch):
    if bad is None:  # a bad variable names the variable
        monkeypatch.setenv(THREADS_ENV, "many")
        name = THREADS_ENV
    else:
        monkeypatch.delenv(THREADS_ENV, raising=False)
        name = "threads"
    with pytest.raises(ParameterError) as info:
        resolve_threads(bad)
    assert info.value.param == name and name in str(info.value)
    with pytest.raises(ParameterError) as info:
        ThreadTeam(bad)
    assert info.value.param == name


@pytest.mark.parametrize("bad", ["0", "-1", "2.5", "x"])
def test_bad_environment_values(bad, monkeypatch):
    monkeypatch.setenv(THREADS_ENV, bad)
    with pytest.raises(ParameterError) as info:
        resolve_threads()
    assert info.value.param == THREADS_ENV
    with pytest.raises(ParameterError) as info:
        resolve_threads(None, name="--threads")
    assert info.value.param == THREADS_ENV


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_parts_run_on_their_own_threads_and_come_back_in_order(threads):
    before = len(_team_threads())
    barrier = threading.Barrier(threads, timeout=30)  # every part runs at the same time
    with ThreadTeam(threads) as team:
        assert team.threads == threads

        def part(i: int) -> tuple[int, int]:
            barrier.wait()
            return i, threading.get_ident()

        out = team.run(part)
        assert [i for i, _ in out] == list(range(threads))
        assert len({ident for _, ident in out}) == threads
        assert out[0][1] == threading.get_ident()  # part 0 runs in the caller
        assert team.run(lambda i: i * i) == [i * i for i in range(threads)]
    assert len(_team_threads()) == before  # joined on leaving the block
    with pytest.raises(RuntimeError, match="closed"):
        team.run(lambda i: i)
    team.close()  # idempotent


def test_an_error_in_a_part_is_raised_after_every_part_finished():
    done = []

    def part(i: int) -> int:
        if i == 1:
            raise KeyError("part 1")
        done.append(i)
        return i

    with ThreadTeam(3) as team:
        with pytest.raises(KeyError, match="part 1"):
            team.run(part)
        assert sorted(done) == [0, 2]
        assert team.run(lambda i: i) == [0, 1, 2]  # still usable
    assert not _team_threads()


def _native(thread: threading.Thread) -> str:
    with open(f"/proc/self/task/{thread.native_id}/comm", encoding="ascii") as fh:
        return fh.read().strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names from /proc")
def test_threads_carry_their_names_into_the_operating_system():
    """``set_native_name`` names the calling thread as ``top -H`` and ``/proc`` show it: the
    Python name without ``parvox-``, cut to Linux's 15 bytes; a team's workers do so."""
    seen = {}

    def body():
        seen["set"] = set_native_name()
        seen["os"] = _native(threading.current_thread())

    t = threading.Thread(target=body, name="parvox-slice-extract-0123")
    t.start()
    t.join()
    assert seen == {"set": True, "os": "slice-extract-0"}
    assert native_name(t.name) == "slice-extract-0"
    with ThreadTeam(3) as team:
        names = team.run(lambda part: _native(threading.current_thread()))
    # part 0 runs on the calling thread; the pool may run both others on one worker
    assert names[1:] and set(names[1:]) <= {"team_0", "team_1"}, names


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names from /proc")
def test_a_dataflow_runtime_names_its_threads():
    from mpi4py import MPI

    from parvox.dataflow import Dataflow, Operation, Stage, Token

    op = Operation("twice", split=lambda n: [Token(0, n)], stages=(Stage(lambda n: 2 * n, "double"),),
                   merge=lambda acc, r: r, init=lambda n: 0)
    with Dataflow([op], MPI.COMM_SELF) as flow:
        assert flow.run("twice", 4) == 8
        names = {_native(t) for t in threading.enumerate() if t.name.startswith("parvox-")}
    assert {"dataflow-comm", "twice-double-0", "dispatch_0"} <= names, names
