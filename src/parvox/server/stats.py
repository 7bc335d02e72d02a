"""The slice server's bookkeeping: admission of requests and the figures ``/api/stats`` shows.

:class:`RequestStats` bounds the pending requests (:class:`ServerBusy` beyond ``max_pending``)
and counts what happened to them: served slices with their latencies, failures, rejections,
bytes sent. :meth:`RequestStats.snapshot` adds what each rank reported in its latest
heartbeat (busy time per stage, tokens, extent cache) to those counts.

Examples
--------
>>> stats = RequestStats(max_pending=1)
>>> stats.admit()
>>> try:
...     stats.admit()
... except ServerBusy as exc:
...     print(exc)
1 requests pending (limit 1)
>>> stats.done(ok=True, seconds=0.02)
>>> s = stats.snapshot({0: {"pid": 1, "cache": {"hits": 3, "misses": 1}}}, {}, rank=0, nranks=1)
>>> s["slices_served"], s["pending"], s["latency_p50_ms"], s["cache_hit_rate"]
(1, 0, 20.0, 0.75)
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import numpy as np

from parvox.errors import ParvoxError
from parvox.slicing.source import SliceSource

__all__ = ["RequestStats", "ServerBusy", "rank_figures"]


class ServerBusy(ParvoxError):
    """The bounded request queue is full; try again later."""


def rank_figures(source: SliceSource) -> dict[str, Any]:
    """What a rank adds to its heartbeat answers: its extent caches' counts (every level)."""
    readers = source.readers()
    cache = {k: sum(r.stats.as_dict()[k] for r in readers) for k in ("hits", "misses",
                                                                      "bytes_read")}
    return {"cache": cache, "cached_bytes": sum(r.cached_bytes for r in readers)}


class RequestStats:
    """Pending requests (bounded) and what became of them (thread-safe).

    Parameters
    ----------
    max_pending : int
        Requests accepted at once; :meth:`admit` raises :class:`ServerBusy` beyond.
    """

    def __init__(self, max_pending: int) -> None:
        self.max_pending = int(max_pending)
        self._lock = threading.Lock()
        self._pending = 0
        self._served = 0
        self._failed = 0
        self._rejected = 0
        self._bytes_out = 0
        self._latency: collections.deque[float] = collections.deque(maxlen=4096)
        self._done_at: collections.deque[float] = collections.deque(maxlen=100_000)
        self._started = time.monotonic()

    def admit(self) -> None:
        """Count a new pending request.

        Raises
        ------
        ServerBusy
            When ``max_pending`` requests are already pending.
        """
        with self._lock:
            if self._pending >= self.max_pending:
                self._rejected += 1
                raise ServerBusy(f"{self._pending} requests pending (limit {self.max_pending})")
            self._pending += 1

    def done(self, ok: bool, seconds: float, record: bool = True) -> None:
        """A pending request ended (``ok``: with its slice, after ``seconds``); ``record``:
        count it among the client slices."""
        with self._lock:
            self._pending -= 1
            if not record:
                return
            if ok:
                self._served += 1
                self._latency.append(seconds)
                self._done_at.append(time.monotonic())
            else:
                self._failed += 1

    def count_bytes_out(self, n: int) -> None:
        """Record ``n`` bytes sent to a client."""
        with self._lock:
            self._bytes_out += n

    def snapshot(
        self,
        statuses: dict[int, dict[str, Any]],
        last_seen: dict[int, float],
        rank: int,
        nranks: int,
    ) -> dict[str, Any]:
        """Served slices, slices/s (last 10 s and overall), latency percentiles (ms), bytes
        read, cache hit rate and per-rank busy time, from ``statuses`` (each rank's latest
        status, this ``rank``'s included) and ``last_seen`` (``time.monotonic()``)."""
        now = time.monotonic()
        with self._lock:
            lat = np.asarray(self._latency, dtype=np.float64) * 1e3
            recent = sum(1 for t in self._done_at if now - t <= 10.0)
            out: dict[str, Any] = {
                "slices_served": self._served,
                "errors": self._failed,
                "rejected_busy": self._rejected,
                "pending": self._pending,
                "bytes_sent": self._bytes_out,
            }
        uptime = now - self._started
        out["uptime_s"] = uptime
        out["slices_per_s"] = recent / min(10.0, max(uptime, 1e-9))
        out["slices_per_s_overall"] = out["slices_served"] / max(uptime, 1e-9)
        for p in (50, 95, 99):
            out[f"latency_p{p}_ms"] = float(np.percentile(lat, p)) if lat.size else None
        ranks: list[dict[str, Any]] = []
        hits = misses = nbytes = 0
        for r in range(nranks):
            st = statuses.get(r)
            if st is None:
                ranks.append({"rank": r, "answered": False})
                continue
            cache = st.get("cache", {})
            hits += cache.get("hits", 0)
            misses += cache.get("misses", 0)
            nbytes += cache.get("bytes_read", 0)
            ranks.append(
                {
                    "rank": r,
                    "pid": st.get("pid"),
                    "host": st.get("host"),
                    "busy_s": float(sum(st.get("busy_s", {}).values())),
                    "busy_by_stage_s": st.get("busy_s", {}),
                    "tokens": st.get("tokens", 0),
                    "messages": st.get("messages", {}),
                    "cache": cache,
                    "last_seen_s": 0.0 if r == rank else now - last_seen.get(r, now),
                }
            )
        out["bytes_read"] = nbytes
        out["cache_hit_rate"] = hits / (hits + misses) if hits + misses else None
        out["ranks"] = ranks
        return out
