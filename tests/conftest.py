"""Shared pytest configuration: MPI test bodies run through :mod:`parvox.testing`."""

from __future__ import annotations

import os


def pytest_configure(config):
    """Every mpiexec the tests start runs ranks that yield the CPU while they poll.

    The suite runs 1-4 ranks on 2 cores: MPICH's busy polling makes a rank waiting in a
    collective spin on the core that the rank it waits for needs (the scipy.ndimage oracle at 4
    ranks: 170 s spinning, 116 s yielding). Results do not change, only waiting costs less.
    """
    os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")


def pytest_collection_modifyitems(config, items):
    """The scale suite runs only when ``-m`` names it (``./test -m scale``); a plain run leaves
    its items out. An MPI item may run its module's whole batch: its pytest-timeout must cover
    it, and under pytest-xdist the items of a batch go to one worker."""
    from parvox.testing import apply_batch_timeouts, group_batches

    if "scale" not in (config.getoption("markexpr") or ""):
        scale = [item for item in items if item.get_closest_marker("scale")]
        if scale:
            config.hook.pytest_deselected(items=scale)
            items[:] = [item for item in items if not item.get_closest_marker("scale")]
    apply_batch_timeouts(items)
    group_batches(items)
