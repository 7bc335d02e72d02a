"""The default suite's look at scale: one launch at 8 ranks and one at 13 run a quick version of
every family's scale check (``./test -m scale`` runs them whole at 5, 8, 13 and 16 ranks).

Not marked ``scale``: these run in a plain ``./test``. Each body is the scale check of its
family with ``quick=True`` (or on one layout), so the two suites share their code."""

from __future__ import annotations

from parvox.testing import mpi_tests
from tests.scale import (
    test_blocks,
    test_collectives,
    test_fft,
    test_io,
    test_ndimage,
    test_recon,
    test_server,
    test_solvers,
    test_spmd,
    test_volume,
)
from tests.scale._layouts import SMOKE_RANKS


def run_ndimage() -> None:
    """Rank filters and morphology on 1-plane blocks (more ranks than planes), labels and
    measurements with fewer planes than ranks (the compiled separable filters, derivatives and
    distance transform cost seconds to load per launch: the scale suite runs them)."""
    for family in ("rank_filters", "morphology"):
        test_ndimage.run_family(family, only=("1-plane-blocks",), first=2)
    test_ndimage.run_measurements(only=("axis0-few-planes",))


def run_numerics() -> None:
    """FFT and Poisson with fewer planes than ranks."""
    test_fft.run_fft(only=("axis0-few-planes",))
    test_solvers.run_poisson(only=("axis0-few-planes",), quick=True)


mpi_tests(
    globals(),
    {
        "smoke_ndimage": run_ndimage,
        "smoke_fft_poisson": run_numerics,
        "smoke_osem": lambda: test_recon.run_osem(quick=True),
        "smoke_blocks": lambda: (test_blocks.run_merge_swap(quick=True),
                                 test_blocks.run_exchange(quick=True)),
        "smoke_compositing_particles": lambda: (test_blocks.run_compositing(quick=True),
                                                test_blocks.run_particles(quick=True)),
        "smoke_collectives": lambda: (test_collectives.run_facade(quick=True),
                                      test_collectives.run_redistribute(quick=True)),
        "smoke_spmd": lambda: test_spmd.run_programs(quick=True),
        "smoke_volume_io": lambda: (test_volume.run_ingest_pyramid(quick=True),
                                    test_io.run_formats(quick=True)),
        "smoke_slice_service": lambda: test_server.run_slice_service(quick=True),
    },
    ranks=SMOKE_RANKS,
    timeout=180,
)
