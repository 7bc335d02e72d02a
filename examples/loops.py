"""Dynamic loop scheduling (DODYN): uneven work items balanced over ranks by a master/worker loop.

Run with ``mpiexec -n 3 python examples/loops.py``.
"""

from __future__ import annotations

import time

from mpi4py import MPI

from parvox.comm import Timers
from parvox.loops import dodyn, dopar


def work(i: int) -> int:
    time.sleep(0.001 * (i % 7))  # items of very different cost
    return i * i


timers = Timers()
with timers("static"):
    mine = [work(i) for i in dopar(100)]  # DOPAR: fixed equal split
with timers("dynamic"):
    results = dodyn(100, work, chunk=2)  # DODYN: ranks ask for more when done
table = timers.table()
if MPI.COMM_WORLD.rank == 0:
    assert results == [i * i for i in range(100)]
    print(table)
