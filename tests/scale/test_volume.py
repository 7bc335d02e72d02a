"""Ingest and pyramid at 5, 8, 13 and 16 ranks: fewer slices than ranks, fewer disks than ranks
and more disks than ranks, 1-slice extents; every level equals the block-mean reference."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import mpi_tests
from tests.scale._layouts import SCALE_RANKS
from tests.volume import test_pyramid


def run_ingest_pyramid(quick: bool = False) -> None:
    """Three stores (``quick``: the first)."""
    import shutil
    import tempfile
    from pathlib import Path

    import tifffile
    from mpi4py import MPI

    from parvox.volume import VolumeStore, ingest
    from parvox.volume.pyramid import build_pyramid, downsample

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    root = Path(comm.bcast(tempfile.mkdtemp(prefix="pvx-scale-") if rank == 0 else None))
    vol = np.random.default_rng(7).integers(0, 60000, (3, 11, 9)).astype(np.uint16)
    if rank == 0:
        np.save(root / "v.npy", vol)
        (root / "tif").mkdir()
        for z in range(vol.shape[0]):  # 3 slices: most ranks read none
            tifffile.imwrite(root / "tif" / f"{z:03d}.tif", vol[z])
    comm.Barrier()
    cases = [  # (source, ndisks, extent, levels)
        (root / "v.npy", 3, (1, 4, 5), 2),  # fewer disks than ranks, 1-slice extents
        (root / "tif", size + 3, (1, 3, 2), 0),  # more disks than ranks
        (vol, 2 * size + 1, (2, 5, 3), 3),  # more disks than extents
    ]
    for i, (source, ndisks, extent, levels) in enumerate(cases[:1] if quick else cases):
        case = f"ingest {i} ({ndisks} disks, extent {extent}) at {size} ranks"
        path = ingest(source, root / f"s{i}", ndisks=ndisks, extent=extent, levels=levels,
                      progress=False)
        for k in range(levels + 1):
            with VolumeStore(path, level=k) as st:
                assert st.verify() == [], case
                np.testing.assert_array_equal(st.read_volume(), downsample(vol, k), err_msg=case)
        if levels == 0:  # levels built afterwards by every rank
            build_pyramid(path, 3, progress=False)
            for k in range(1, 4):
                np.testing.assert_array_equal(VolumeStore(path, level=k).read_volume(),
                                              downsample(vol, k), err_msg=case)
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(root)


mpi_tests(
    globals(),
    {"volume_ingest_pyramid": run_ingest_pyramid,
     "volume_levels_from_slabs":
         test_pyramid.test_levels_written_from_slabs_match_at_any_rank_count},
    ranks=SCALE_RANKS,
    timeout=240,
    marks=[pytest.mark.scale],
)
