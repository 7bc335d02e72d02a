"""The slice server's engine and HTTP API in one script (no network: Starlette's test client).

Run: ``mpiexec -n 4 python examples/slice_server.py``. For the real server and viewer use
``parvox serve STORE -n 4`` and open the URL it prints.
"""

import io
import os
import shutil
import tempfile

import numpy as np
from mpi4py import MPI
from starlette.testclient import TestClient

from parvox.server.app import create_app
from parvox.server.engine import SliceService
from parvox.slicing import reference_slice
from parvox.volume import ingest_array

comm = MPI.COMM_WORLD
z, y, x = np.mgrid[0:40, 0:48, 0:56]
volume = ((x * 3 + y * 2 + z * 5) % 256).astype(np.uint8)  # identical on every rank
path = comm.bcast(tempfile.mkdtemp(prefix="parvox-serve-") if comm.rank == 0 else None)
store = ingest_array(volume, os.path.join(path, "store"), ndisks=4, extent=(8, 16, 16),
                     progress=False, comm=comm)

with SliceService(store, comm=comm) as service:
    if comm.rank == 0:
        client = TestClient(create_app(service))
        query = "center=20,24,28&normal=1,1,1&size=64,64&format=npy"
        got = np.load(io.BytesIO(client.get(f"/api/slice?{query}").content))
        plane = service.plane(center=(20, 24, 28), normal=(1, 1, 1), size=(64, 64))
        assert np.allclose(got, reference_slice(volume, plane), atol=1e-3)
        bad = client.get("/api/slice?center=20,24,28&normal=0,0,0&size=64,64")
        print("400 for a zero normal:", bad.json())
        stats = client.get("/api/stats").json()
        print(f"served {stats['slices_served']} slice(s), p50 {stats['latency_p50_ms']:.1f} ms, "
              f"cache hit rate {stats['cache_hit_rate']:.2f}, {len(stats['ranks'])} ranks")
        service.flow.stop_all()
    else:
        service.flow.serve_forever()

comm.Barrier()  # every rank is done with the store: remove it
if comm.rank == 0:
    shutil.rmtree(path)
