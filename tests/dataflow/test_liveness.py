"""parvox.dataflow.liveness: the peer table, the local process probe, the policy, the watchdog.

Unit level: a fake clock and fake probes stand for time and processes, so every verdict is
decided by the test, not by the machine's load.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from parvox.dataflow.liveness import LivenessPolicy, Peers, Watchdog, process_alive


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _peers(size: int = 4, rank: int = 0) -> tuple[Peers, Clock]:
    clock = Clock()
    return Peers(rank, size, clock=clock), clock


def test_policy_declares_the_longest_silent_rank_after_dead_after():
    peers, clock = _peers(4)
    policy = LivenessPolicy(dead_after=3.0, silent_after=1.0, probe=lambda st: True)
    clock.now += 2.0
    assert policy.verdict(peers) is None  # 2 s of silence: not dead yet
    assert not policy.healthy(peers)  # but unhealthy after 1 s
    peers.heard(1)
    clock.now += 1.5  # ranks 2, 3: 3.5 s silent; rank 1: 1.5 s
    assert policy.verdict(peers) == (2, 3.5)  # ties: the lowest rank
    peers.heard(2)
    peers.heard(3)
    peers.heard(1)
    assert policy.verdict(peers) is None and policy.healthy(peers)
    clock.now += 0.5
    assert policy.healthy(peers)  # within silent_after


def test_this_rank_is_never_silent():
    peers, clock = _peers(3, rank=1)
    policy = LivenessPolicy(dead_after=1.0, probe=lambda st: True)
    clock.now += 5.0
    peers.heard(0)
    peers.heard(2)
    assert policy.verdict(peers) is None  # rank 1 never hears from itself


def test_a_gone_local_process_is_dead_at_once():
    peers, _ = _peers(3)
    peers.answered(1, {"pid": 11})
    peers.answered(2, {"pid": 22})
    gone = {22}
    policy = LivenessPolicy(dead_after=60.0, probe=lambda st: st["pid"] not in gone)
    assert policy.verdict(peers) == (2, float("inf"))  # no silence needed
    assert peers.dead == {2}
    assert peers.silent(60.0) == {2: float("inf")}


def test_unknown_status_is_left_to_the_heartbeats():
    peers, _ = _peers(2)
    calls = []
    policy = LivenessPolicy(dead_after=3.0, probe=lambda st: calls.append(st) or False)
    assert policy.verdict(peers) is None and calls == []  # rank 1 never answered: not probed


def test_peer_snapshots_are_copies():
    peers, _ = _peers(2)
    dead = peers.dead
    peers.mark_dead(1)
    status = peers.status
    peers.answered(1, {"pid": 1})
    assert dead == frozenset() and peers.dead == {1}
    assert status == {} and peers.status == {1: {"pid": 1}}


def test_policy_rejects_bad_times():
    with pytest.raises(ValueError, match="dead_after"):
        LivenessPolicy(dead_after=0)
    with pytest.raises(ValueError, match="silent_after"):
        LivenessPolicy(silent_after=-1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_process_alive_against_real_processes():
    host = socket.gethostname()
    assert process_alive({"pid": os.getpid(), "host": host})
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: no such process any more
    assert not process_alive({"pid": child.pid, "host": host})
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # exited, not yet reaped: a zombie
        with open(f"/proc/{zombie.pid}/stat", encoding="ascii") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    assert not process_alive({"pid": zombie.pid, "host": host})
    zombie.wait()
    assert process_alive({"pid": child.pid, "host": host + "-elsewhere"})  # remote: unknown


def test_watchdog_pings_the_living_and_reports_the_dead_once():
    peers = Peers(0, 3)
    pings: list[int] = []
    reports: list[tuple[int, float, int | None]] = []
    reported = threading.Event()
    gone = set()

    def ping(r: int) -> None:
        pings.append(r)
        if r not in gone:
            peers.answered(r, {"pid": 100 + r})

    def on_dead(rank: int, silence: float, pid: int | None) -> None:
        reports.append((rank, silence, pid))
        reported.set()

    policy = LivenessPolicy(dead_after=60.0, probe=lambda st: st["pid"] - 100 not in gone)
    dog = Watchdog(peers, ping, policy, interval=0.01, on_dead=on_dead, check_every=0.005)
    try:
        deadline = time.monotonic() + 30
        while not {1, 2} <= set(pings) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert {1, 2} <= set(pings) and 0 not in pings  # never pings itself
        assert not reports
        gone.add(2)
        assert reported.wait(30)
        time.sleep(0.05)
    finally:
        dog.stop()
    assert reports == [(2, float("inf"), 102)]  # once, naming rank and pid


def test_watchdog_without_on_dead_marks_and_stops_pinging():
    peers = Peers(0, 2)
    pings: list[int] = []
    peers.answered(1, {"pid": 1})
    policy = LivenessPolicy(dead_after=60.0, probe=lambda st: False)
    dog = Watchdog(peers, pings.append, policy, interval=0.01, check_every=0.005)
    try:
        deadline = time.monotonic() + 30
        while 1 not in peers.dead and time.monotonic() < deadline:
            time.sleep(0.01)
        n = len(pings)
        time.sleep(0.1)
    finally:
        dog.stop()
    assert peers.dead == {1} and len(pings) == n  # the dead rank is not pinged again
