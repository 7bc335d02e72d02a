"""Node pipelining from Python: a recursive filter down the rows with ``parvox.loops.pipe``.

``y[i] = a * y[i - 1] + (1 - a) * x[i]`` carries a dependence from row to row. ``pipe`` gives
each rank the iterations in its part of the rows, after the last row of the rank before it
arrives; then ``pipe_tiles`` runs a 2-D causal recursion as a wavefront, the columns cut into
chunks so the ranks work at once. Run with ``mpiexec -n 4 python examples/pipe_loop.py``.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from parvox.decomposition import split_extent
from parvox.loops import pipe, pipe_tiles

comm = MPI.COMM_WORLD
x = np.random.default_rng(2).random((101, 64))  # every rank builds the same input
a = 0.9

y = x.copy()
for i in pipe(y, range(1, len(y))):
    y[i] = a * y[i - 1] + (1 - a) * x[i]

s = x.copy()
for rows, cols in pipe_tiles(s, range(1, len(s)), range(1, s.shape[1]), chunk=16):
    for i in rows:
        for j in cols:
            s[i, j] += a * s[i - 1, j] + a * s[i, j - 1] - a * a * s[i - 1, j - 1]

# each rank holds its own part of the rows; compare it with the serial loops
want_y, want_s = x.copy(), x.copy()
for i in range(1, len(x)):
    want_y[i] = a * want_y[i - 1] + (1 - a) * x[i]
    for j in range(1, x.shape[1]):
        want_s[i, j] += a * want_s[i - 1, j] + a * want_s[i, j - 1] - a * a * want_s[i - 1, j - 1]
lo, hi = split_extent(len(x), comm.size, comm.rank)
same = comm.allreduce(
    bool(np.array_equal(y[lo:hi], want_y[lo:hi]) and np.array_equal(s[lo:hi], want_s[lo:hi])),
    op=MPI.LAND,
)
if comm.rank == 0:
    print(f"{comm.size} ranks: pipelined loops equal the serial loops: {same}")
assert same, "the pipelined loops differ from the serial loops"
