"""``parvox.dataflow``: the CAP construct (seed 002, section 3) in Python over MPI.

A parallel operation is a ``split`` function producing tokens, pipelined stages run on the
rank that owns the data each token names, and a ``merge`` that collects exactly as many results
as were split. :class:`Dataflow` runs such operations on every rank with threads, bounded
queues, per-destination flow control and shortest-queue load balancing. A stage may be an
operation itself (hierarchical composition), a placement map may run a stage on a rank of its
own (:func:`place`), and messages to one rank may be coalesced (``coalesce``); :func:`serial` is
the one-process reference run. See ``docs/dataflow.md``.

Examples
--------
>>> import numpy as np
>>> from parvox.dataflow import Dataflow, Operation, Stage, Token
>>> op = Operation("norm2", split=lambda xs: [Token(0, x) for x in xs],
...                stages=(Stage(np.square, "square"), Stage(np.sum, "sum")),
...                merge=lambda acc, r: acc + float(r), init=lambda xs: 0.0)
>>> with Dataflow([op]) as flow:
...     flow.run("norm2", [np.arange(3.0), np.ones(2)])
7.0
"""

from parvox.dataflow.operation import Operation, Stage, Token, serial
from parvox.dataflow.placement import place
from parvox.dataflow.runtime import Dataflow, DataflowError, DataflowTimeout
from parvox.dataflow.wire import pack, unpack

__all__ = [
    "Dataflow",
    "DataflowError",
    "DataflowTimeout",
    "Operation",
    "Stage",
    "Token",
    "pack",
    "place",
    "serial",
    "unpack",
]
