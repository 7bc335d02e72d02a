"""Rank liveness for the dataflow runtime: what a rank knows of its peers, and one policy.

* :class:`Peers` -- the table every thread shares: when each rank was last heard from, the
  figures its latest heartbeat answer carried (pid, host, ...), the ranks found dead. Written
  by the communication thread and the watchdog, read by anyone, always through snapshots under
  one lock, so readers never race with writers.
* :func:`process_alive` -- the local process probe: a rank on this host whose process is gone
  (or a zombie, per ``/proc``) is dead before the MPI library notices it.
* :class:`LivenessPolicy` -- the one rule: a rank is dead when its local process is gone, or
  when it has been silent for ``dead_after`` seconds; it is unhealthy once silent for
  ``silent_after`` seconds.
* :class:`Watchdog` -- the thread applying it on the rank that watches the others (the one
  serving clients): it pings every ``interval`` seconds, probes local processes every
  ``check_every`` seconds and calls ``on_dead(rank, silence, pid)`` once for the first rank the
  policy declares dead.

Examples
--------
>>> now = [100.0]
>>> peers = Peers(rank=0, size=3, clock=lambda: now[0])
>>> peers.answered(1, {"pid": 1, "host": "elsewhere"})
>>> now[0] += 5.0
>>> peers.heard(2)
>>> policy = LivenessPolicy(dead_after=3.0, silent_after=1.0, probe=lambda status: True)
>>> policy.verdict(peers), policy.healthy(peers)
((1, 5.0), False)
"""

from __future__ import annotations

import dataclasses
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from parvox.threads import set_native_name

__all__ = ["LivenessPolicy", "Peers", "Watchdog", "process_alive"]


class Peers:
    """What one rank knows of the other ranks of its communicator (thread-safe).

    Parameters
    ----------
    rank, size : int
        This rank and the communicator's size.
    clock : callable
        Seconds, monotonic (``time.monotonic`` by default; a test passes its own).
    """

    def __init__(self, rank: int, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rank = rank
        self.size = size
        self._clock = clock
        self._lock = threading.Lock()
        now = clock()
        self._last_seen = {r: now for r in range(size)}
        self._status: dict[int, dict[str, Any]] = {}
        self._dead: set[int] = set()

    def heard(self, rank: int) -> None:
        """A message came from ``rank`` now."""
        now = self._clock()
        with self._lock:
            self._last_seen[rank] = now

    def answered(self, rank: int, status: dict[str, Any]) -> None:
        """``rank`` answered a heartbeat with ``status`` now."""
        now = self._clock()
        with self._lock:
            self._last_seen[rank] = now
            self._status[rank] = status

    def restart(self) -> None:
        """Count every rank as heard from now (when the heartbeats start)."""
        now = self._clock()
        with self._lock:
            for r in self._last_seen:
                self._last_seen[r] = now

    def mark_dead(self, rank: int) -> None:
        """Record that ``rank`` is dead: it is not pinged again and :meth:`silent` reports it."""
        with self._lock:
            self._dead.add(rank)

    @property
    def last_seen(self) -> dict[int, float]:
        """A snapshot: the clock's time when each rank was last heard from."""
        with self._lock:
            return dict(self._last_seen)

    @property
    def status(self) -> dict[int, dict[str, Any]]:
        """A snapshot: each other rank's status from its latest heartbeat answer."""
        with self._lock:
            return dict(self._status)

    @property
    def dead(self) -> frozenset[int]:
        """A snapshot: the ranks found dead."""
        with self._lock:
            return frozenset(self._dead)

    def silent(self, after: float) -> dict[int, float]:
        """Other ranks not heard from for more than ``after`` seconds, with their silence
        (``inf`` for a rank found dead)."""
        now = self._clock()
        with self._lock:
            out = {
                r: now - t for r, t in self._last_seen.items() if r != self.rank and now - t > after
            }
            out.update({r: float("inf") for r in self._dead})
        return out


def process_alive(status: dict[str, Any]) -> bool:
    """``False`` when the rank whose heartbeat ``status`` this is runs on this host and its
    process is gone or a zombie; ``True`` when it lives, or runs elsewhere, or is unknown (the
    heartbeats decide then).

    Examples
    --------
    >>> import os
    >>> process_alive({"pid": os.getpid(), "host": socket.gethostname()})
    True
    >>> process_alive({"pid": 1, "host": "another-host"}), process_alive({})
    (True, True)
    """
    if not status or status.get("host") != socket.gethostname() or not status.get("pid"):
        return True
    try:
        with open(f"/proc/{int(status['pid'])}/stat", encoding="ascii") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return not sys.platform.startswith("linux")
    return state not in ("Z", "X")


@dataclasses.dataclass(frozen=True)
class LivenessPolicy:
    """When a rank counts as unhealthy and when as dead.

    Parameters
    ----------
    dead_after : float
        Seconds of silence after which a rank is dead (> 0).
    silent_after : float
        Seconds of silence after which the job is unhealthy (``/health`` fails).
    probe : callable
        ``probe(status) -> bool``: whether the process behind a rank's heartbeat status lives
        (:func:`process_alive` by default).
    """

    dead_after: float = 3.0
    silent_after: float = 1.5
    probe: Callable[[dict[str, Any]], bool] = process_alive

    def __post_init__(self) -> None:
        if not self.dead_after > 0:
            raise ValueError(f"dead_after must be > 0, got {self.dead_after}")
        if not self.silent_after > 0:
            raise ValueError(f"silent_after must be > 0, got {self.silent_after}")

    def probe_all(self, peers: Peers) -> None:
        """Mark dead every rank whose process the probe finds gone."""
        dead = peers.dead
        for r, st in peers.status.items():
            if r != peers.rank and r not in dead and not self.probe(st):
                peers.mark_dead(r)

    def verdict(self, peers: Peers) -> tuple[int, float] | None:
        """Probe, then the rank to declare dead and its silence (``inf``: found dead), the
        longest silent first; ``None`` while every rank is alive."""
        self.probe_all(peers)
        silent = peers.silent(self.dead_after)
        if not silent:
            return None
        return max(silent.items(), key=lambda kv: (kv[1], -kv[0]))

    def healthy(self, peers: Peers) -> bool:
        """Whether every rank was heard from within ``silent_after`` seconds."""
        return not peers.silent(self.silent_after)


class Watchdog:
    """Ping the other ranks and apply a :class:`LivenessPolicy` in one thread.

    Parameters
    ----------
    peers : Peers
    ping : callable
        ``ping(rank)`` sends a heartbeat request (the answer reaches :meth:`Peers.answered`).
    policy : LivenessPolicy
    interval : float
        Seconds between pings.
    on_dead : callable, optional
        ``on_dead(rank, silence, pid)``, called once, for the first rank declared dead; without
        it the watchdog only pings and probes (the ranks found dead are marked in ``peers``).
    check_every : float
        Seconds between probes of local processes: a rank that died must be named before
        the next message to it (which MPICH may answer by killing the whole job).
    """

    def __init__(
        self,
        peers: Peers,
        ping: Callable[[int], None],
        policy: LivenessPolicy,
        interval: float = 0.5,
        on_dead: Callable[[int, float, int | None], None] | None = None,
        check_every: float = 0.05,
    ) -> None:
        self.peers = peers
        self.policy = policy
        self._ping = ping
        self._interval = float(interval)
        self._on_dead = on_dead
        self._check_every = min(float(check_every), self._interval)
        self._stop = threading.Event()
        peers.restart()
        self._thread = threading.Thread(target=self._run, name="parvox-watchdog", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        set_native_name()
        next_ping = time.monotonic() + self._interval
        while not self._stop.wait(self._check_every):
            if self._step(next_ping):
                return
            if time.monotonic() >= next_ping:
                next_ping = time.monotonic() + self._interval

    def _step(self, next_ping: float) -> bool:
        """One tick: probe and decide, ping when due; ``True`` once ``on_dead`` was called."""
        found = self.policy.verdict(self.peers)
        if found is not None and self._on_dead is not None:
            rank, silence = found
            self._on_dead(rank, silence, self.peers.status.get(rank, {}).get("pid"))
            return True
        if time.monotonic() >= next_ping:
            dead = self.peers.dead
            for r in range(self.peers.size):
                if r != self.peers.rank and r not in dead:
                    self._ping(r)
        return False

    def stop(self) -> None:
        """Stop the thread and wait for it."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
