"""Streamline tracing over blocks against the same RK4 integrator run without blocks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from parvox.particles import abc_field, grid_field, seed_points, trace_serial
from parvox.testing import mpi_test


def _sampled_abc(shape=(13, 17, 19), scale=3.0) -> np.ndarray:
    z, y, x = np.meshgrid(*[np.linspace(0, 2 * np.pi, n) for n in shape], indexing="ij")
    a, b, c = math.sqrt(3), math.sqrt(2), 1.0
    v = [
        c * np.sin(y) + b * np.cos(x),
        b * np.sin(x) + a * np.cos(z),
        a * np.sin(z) + c * np.cos(y),
    ]
    return np.stack(v, -1) * scale


def test_serial_rk4_matches_a_numpy_rk4_of_the_abc_flow():
    def vel(p):
        z, y, x = p
        a, b, c = math.sqrt(3), math.sqrt(2), 1.0
        return np.array(
            [
                c * np.sin(y) + b * np.cos(x),
                b * np.sin(x) + a * np.cos(z),
                a * np.sin(z) + c * np.cos(y),
            ]
        )

    seeds = seed_points(abc_field(), 4, seed=5)
    h, steps = 0.05, 40
    for s, end in zip(seeds, trace_serial(abc_field(), seeds, steps, h), strict=True):
        p = s.copy()
        for _ in range(steps):
            k1 = vel(p)
            k2 = vel(p + 0.5 * h * k1)
            k3 = vel(p + 0.5 * h * k2)
            k4 = vel(p + h * k3)
            p = p + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        np.testing.assert_allclose(end, p, atol=1e-12)


def test_sampled_field_is_trilinear_and_stops_at_the_domain_edge():
    lin = np.zeros((4, 5, 6, 3))
    lin[..., 2] = 1.0  # constant vx = 1: particles move along x and stop before leaving
    ends = trace_serial(grid_field(lin), np.array([[1.5, 2.0, 0.25]]), 100, 0.5)
    assert ends[0, 0] == 1.5 and ends[0, 1] == 2.0
    assert 4.5 <= ends[0, 2] <= 5.0  # one more step of 0.5 would leave [0, 5]
    with pytest.raises(ValueError, match=r"\(Z, Y, X, 3\)"):
        grid_field(np.zeros((4, 5, 3)))
    with pytest.raises(TypeError, match="floating"):
        grid_field(np.zeros((4, 5, 6, 3), int))
    with pytest.raises(ValueError, match="steps"):
        trace_serial(abc_field(), np.zeros((1, 3)), -1, 0.1)
    with pytest.raises(ValueError, match="h must"):
        trace_serial(abc_field(), np.zeros((1, 3)), 1, 0.0)
    with pytest.raises(ValueError, match="seeds"):
        trace_serial(abc_field(), np.zeros((1, 2)), 1, 0.1)


@mpi_test(timeout=150)
def test_trace_over_blocks_equals_the_serial_trace():
    from mpi4py import MPI

    from parvox.blocks import Master
    from parvox.particles import trace

    size = MPI.COMM_WORLD.Get_size()
    rank = MPI.COMM_WORLD.Get_rank()
    fields = [(abc_field(), 0.05, 150), (grid_field(_sampled_abc()), 0.1, 80)]
    for field, h, steps in fields:
        seeds = seed_points(field, 37, seed=3)
        ref = trace_serial(field, seeds, steps, h)
        for per_rank in (1, 3, 8):
            for arrivals in (1, 4):
                m = Master(
                    per_rank * size,
                    "round_robin" if per_rank == 3 else "contiguous",
                    threads=2 if per_rank == 8 else 1,  # blocks advance on threads (nogil)
                )
                ends = trace(m, field, seeds, steps, h, arrivals=arrivals, root=size - 1)
                if rank == size - 1:
                    assert np.abs(ends - ref).max() <= 1e-9
                else:
                    assert ends is None
        m = Master(2 * size)
        mine = trace(m, field, seeds, steps, h, root=None)
        allp = {}
        for part in MPI.COMM_WORLD.allgather(mine):
            allp.update(part)
        assert sorted(allp) == list(range(len(seeds)))
        np.testing.assert_array_equal(np.array([allp[i] for i in range(len(seeds))]), ref)
        # the synchronous baseline (all ranks exchange every round) ends the same
        sync = trace(Master(3 * size, "round_robin"), field, seeds, steps, h, root=0,
                     synchronous=True)
        if rank == 0:
            assert np.abs(sync - ref).max() <= 1e-9
    with pytest.raises(ValueError, match="narrowest block"):
        trace(Master(27), abc_field(8), seed_points(abc_field(), 3), 5, 2.0)
