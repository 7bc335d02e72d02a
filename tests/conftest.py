"""Shared pytest configuration: MPI test bodies run through :mod:`parvox.testing`."""
