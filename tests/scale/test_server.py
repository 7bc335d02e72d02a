"""The slice server at scale: the MPI engine (``SliceService``) at 5, 8, 13 and 16 ranks, on
stores with fewer disks than ranks and more, answers every slice equal to the serial
extraction; and a real ``parvox serve -n 5`` job answers ``/api/slice`` with the same slice."""

from __future__ import annotations

import io

import numpy as np
import pytest

from parvox.testing import mpi_tests
from tests.scale._layouts import SCALE_RANKS


def run_slice_service(quick: bool = False) -> None:
    """Four slices from each of two stores (``quick``: two from the one with more disks)."""
    import shutil
    import tempfile
    from pathlib import Path

    from mpi4py import MPI

    from parvox.server.engine import SliceService
    from parvox.server.options import ServerOptions
    from parvox.volume import ingest_array
    from tests.server._helpers import sample_volume
    from tests.server.test_engine import _check, _planes

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    root = Path(comm.bcast(tempfile.mkdtemp(prefix="pvx-scale-") if rank == 0 else None))
    vol = sample_volume((9, 21, 17))
    for ndisks in (2 * size + 1,) if quick else (3, 2 * size + 1):  # fewer disks than ranks (idle servers), more
        path = None
        if rank == 0:
            path = ingest_array(vol, root / f"s{ndisks}", ndisks=ndisks, extent=(2, 8, 8),
                                progress=False, comm=MPI.COMM_SELF)
        path = comm.bcast(path, root=0)
        with SliceService(path, ServerOptions(batch=2, window=1, cache_bytes=1 << 14),
                          comm) as service:
            if rank == 0:
                planes = _planes(service.source, 2 if quick else 4, seed=size + ndisks)
                futures = [service.submit(p) for p in planes]
                for plane, fut in zip(planes, futures, strict=True):
                    _check(vol, plane, fut.result(timeout=120))
                assert service.stats()["slices_served"] == len(planes)
                service.flow.stop_all()
            else:
                service.flow.serve_forever()
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(root)


mpi_tests(globals(), {"slice_service": run_slice_service}, ranks=SCALE_RANKS, timeout=240,
          marks=[pytest.mark.scale])


@pytest.mark.scale
@pytest.mark.timeout(300)
def test_served_slice_at_5_ranks_equals_the_serial_extraction(tmp_path):
    import httpx

    from parvox.slicing import reference_slice
    from tests.server._helpers import make_store_in_subprocess, running_server, sample_volume
    from tests.server.test_http import QUERIES, _plane

    store = make_store_in_subprocess(tmp_path / "store")
    vol = sample_volume()
    with running_server(store, 5, logdir=tmp_path) as srv:
        for query in QUERIES[:2]:
            r = httpx.get(f"{srv.url}/api/slice?{query}&format=npy", timeout=120)
            assert r.status_code == 200, r.text
            raw = np.load(io.BytesIO(r.content))
            np.testing.assert_allclose(raw, reference_slice(vol, _plane(query)), rtol=1e-5,
                                       atol=1e-3)
