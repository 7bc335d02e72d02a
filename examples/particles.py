"""Particle tracing: 500 streamlines through the ABC flow cut into 8 blocks per rank.

Particles that leave a block are handed to the neighbour block by neighbourhood exchange;
rank 0 checks the end points against the serial RK4 trace.

Run with ``mpiexec -n 4 python examples/particles.py`` (or plain ``python`` for one rank).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from parvox.blocks import Master
from parvox.particles import abc_field, seed_points, trace, trace_serial

field = abc_field()
seeds = seed_points(field, 500, seed=7)
stats: list = []
ends = trace(
    Master(8 * MPI.COMM_WORLD.Get_size()), field, seeds, steps=300, h=0.05, arrivals=2, stats=stats
)
if ends is not None:
    ref = trace_serial(field, seeds, 300, 0.05)
    assert np.abs(ends - ref).max() <= 1e-9  # the same integrator, block by block
    print(f"max |end - serial| = {np.abs(ends - ref).max():.3g}; rank 0: {stats[0]}")
