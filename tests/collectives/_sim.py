"""Run the schedules of all P ranks in one process (messages matched FIFO per pair).

Sends are buffered (copied when posted), receives complete when a message of the same pair
is queued; a size mismatch or a stall (no rank can progress) raises. This checks every
algorithm at many rank counts in milliseconds; the MPI tests check the real engine.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from parvox.collectives.schedule import LOCAL, SEND, Schedule


def simulate(schedules: list[Schedule]) -> None:
    size = len(schedules)
    chan: dict[tuple[int, int], deque] = {}
    rnd = [-1] * size
    pending: list[list[tuple[np.ndarray, int]]] = [[] for _ in range(size)]

    def post(r: int) -> None:
        rnd[r] += 1
        for kind, obj, peer in schedules[r].rounds[rnd[r]]:
            if kind == LOCAL:
                obj()
                continue
            buf = obj() if callable(obj) else obj
            assert 0 <= peer < size, (schedules[r].name, peer)
            if kind == SEND:
                chan.setdefault((r, peer), deque()).append(np.array(buf).view(np.uint8).copy())
            else:
                pending[r].append((buf, peer))

    for r in range(size):
        post(r)
    while True:
        moved = False
        for r in range(size):
            still = []
            for buf, peer in pending[r]:
                q = chan.get((peer, r))
                if q:
                    data = q.popleft()
                    view = buf.reshape(-1).view(np.uint8)
                    assert view.shape == data.shape, (schedules[r].name, r, peer, view.shape,
                                                      data.shape)
                    view[...] = data
                    moved = True
                else:
                    still.append((buf, peer))
            pending[r] = still
            while not pending[r] and rnd[r] + 1 < len(schedules[r].rounds):
                post(r)
                moved = True
        if all(not pending[r] and rnd[r] + 1 >= len(schedules[r].rounds) for r in range(size)):
            break
        if not moved:
            raise RuntimeError(f"stall: rounds {rnd}, pending {[len(p) for p in pending]}")
    left = {k: len(q) for k, q in chan.items() if q}
    assert not left, f"unreceived messages {left}"
