"""Shared pytest configuration: MPI test bodies run through :mod:`parvox.testing`."""

from __future__ import annotations


def pytest_collection_modifyitems(items):
    """An MPI item may run its module's whole batch: its pytest-timeout must cover it."""
    from parvox.testing import apply_batch_timeouts

    apply_batch_timeouts(items)
