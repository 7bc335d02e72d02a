"""Collective schedules: a collective is a list of rounds of sends, receives and local steps.

This is LibNBC's model in Python. A :class:`Schedule` holds rounds; a round is an ordered list
of actions -- post a send, post a receive, run a local step (a reduction or a copy). Actions of
a round are executed in order when the round starts (sends and receives are only *posted*, so a
local step placed after them overlaps with the transfers); the round completes when all its
messages have completed, and only then does the next round start. A local step may therefore use
data received in earlier rounds, never data received in its own round.

Messages travel as raw bytes (``[array, MPI.BYTE]``): no pickling, any dtype. Each collective
instance gets its own tag on a private duplicate of the user's communicator, so any number of
collectives may be outstanding on one communicator and none collides with user messages.

Examples
--------
>>> import numpy as np
>>> s = Schedule("demo")
>>> buf = np.zeros(3)
>>> s.local(lambda: buf.fill(1.0))
>>> s.next_round()
>>> s.recv(buf, peer=0)
>>> len(s.rounds), s.nmessages
(2, 1)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["LOCAL", "RECV", "SEND", "Schedule"]

SEND = 0
RECV = 1
LOCAL = 2

BufferLike = np.ndarray | Callable[[], np.ndarray]


class Schedule:
    """An ordered list of rounds; see the module docstring for the execution model.

    Parameters
    ----------
    name : str
        What the schedule computes (shown in errors), e.g. ``"allreduce/ring"``.

    Attributes
    ----------
    rounds : list of list of tuple
        ``(SEND, buf, peer)``, ``(RECV, buf, peer)`` or ``(LOCAL, fn, None)``; ``buf`` may be a
        callable that returns the array when the action is posted (for buffers whose size is
        only known after an earlier round).
    result : object
        What the request returns when the schedule has completed.
    keep : list
        Extra objects the schedule must keep alive until it completes (temporaries).
    """

    __slots__ = ("keep", "name", "result", "rounds")

    def __init__(self, name: str) -> None:
        self.name = name
        self.rounds: list[list[tuple[int, Any, int | None]]] = [[]]
        self.result: Any = None
        self.keep: list[Any] = []

    def send(self, buf: BufferLike, peer: int) -> None:
        """Post a send of ``buf`` (a contiguous array) to ``peer`` in the current round."""
        self.rounds[-1].append((SEND, buf, peer))

    def recv(self, buf: BufferLike, peer: int) -> None:
        """Post a receive into ``buf`` (a contiguous array) from ``peer`` in the current round."""
        self.rounds[-1].append((RECV, buf, peer))

    def local(self, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` (a reduction, a copy) when the current round starts, in action order."""
        self.rounds[-1].append((LOCAL, fn, None))

    def next_round(self) -> None:
        """Close the current round: later actions wait until its messages have completed."""
        if self.rounds[-1]:
            self.rounds.append([])

    def extend(self, other: Schedule) -> None:
        """Append ``other``'s rounds after this schedule's rounds (same tag, run in sequence)."""
        self.next_round()
        for rnd in other.rounds:
            if rnd:
                self.rounds[-1].extend(rnd)
                self.rounds.append([])
        self.keep.extend(other.keep)

    def compact(self) -> Schedule:
        """Drop empty rounds (the engine skips them anyway); return ``self``."""
        self.rounds = [r for r in self.rounds if r] or [[]]
        return self

    @property
    def nmessages(self) -> int:
        """How many sends and receives the schedule posts in total."""
        return sum(1 for rnd in self.rounds for act in rnd if act[0] != LOCAL)

    def __repr__(self) -> str:
        return f"Schedule({self.name!r}, rounds={len(self.rounds)}, messages={self.nmessages})"
