"""Shared pytest configuration: MPI test bodies run through :mod:`parvox.testing`."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

#: the temporary directory of this pytest process (removed, whatever is left in it, at its end)
#: and the ``TMPDIR`` it replaced
_SESSION_TMP: list[tuple[str, str | None]] = []


def pytest_configure(config):
    """Every mpiexec the tests start runs ranks that yield the CPU while they poll, and every
    temporary file the tests make lands in one directory that is removed at the end.

    The suite runs 1-4 ranks on 2 cores: MPICH's busy polling makes a rank waiting in a
    collective spin on the core that the rank it waits for needs (the scipy.ndimage oracle at 4
    ranks: 170 s spinning, 116 s yielding). Results do not change, only waiting costs less.

    Docstring examples, examples/ scripts and MPI test bodies call ``tempfile.mkdtemp()`` as a
    user would (rank 0 makes a directory and broadcasts it); a rank killed by its timeout
    cannot clean up either. ``TMPDIR`` (inherited by every mpiexec and rank) and
    ``tempfile.tempdir`` point at a directory of this process, removed in
    :func:`pytest_unconfigure`, so that no run leaves files in /tmp.
    """
    os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    where = tempfile.mkdtemp(prefix="parvox-tests-")
    _SESSION_TMP.append((where, os.environ.get("TMPDIR")))
    os.environ["TMPDIR"] = where
    tempfile.tempdir = where


def pytest_unconfigure(config):
    """Remove the directory that :func:`pytest_configure` made, and restore ``TMPDIR``."""
    while _SESSION_TMP:
        where, previous = _SESSION_TMP.pop()
        tempfile.tempdir = None
        if previous is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = previous
        shutil.rmtree(where, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The scale suite runs only when ``-m`` names it (``./test -m scale``); a plain run leaves
    its items out. An MPI item may run its module's whole batch: its pytest-timeout must cover
    it, and under pytest-xdist the items of a batch go to one worker, the batches spread
    through the run (``./test`` keeps this order: ``--no-loadscope-reorder``).

    First of the hooks (``tryfirst``): pytest-xdist's worker reads the ``xdist_group`` marks in
    its own hook, to append the group to each node id. After it, the marks came too late, and
    the items of one batch went to both workers, each running the whole batch (until
    2026-11-27)."""
    from parvox.testing import apply_batch_timeouts, group_batches, spread_batches

    if "scale" not in (config.getoption("markexpr") or ""):
        scale = [item for item in items if item.get_closest_marker("scale")]
        if scale:
            config.hook.pytest_deselected(items=scale)
            items[:] = [item for item in items if not item.get_closest_marker("scale")]
    apply_batch_timeouts(items)
    group_batches(items)
    spread_batches(items)
