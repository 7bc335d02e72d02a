"""A parallel histogram of a volume store with parvox.dataflow (split / stages / merge).

Run: ``mpiexec -n 4 python examples/dataflow_histogram.py`` (any rank count).

The split (rank 0) deals the store's extents in batches; each batch may be read by any rank
(the disks are directories on a shared filesystem here), so a token names every rank and the
runtime sends it to the one with the fewest tokens in flight. On that rank an I/O stage reads the
batch while a compute stage counts the previous one; the merge adds the counts.
"""

import os
import shutil
import tempfile

import numpy as np
from mpi4py import MPI

from parvox.dataflow import Dataflow, Operation, Stage, Token
from parvox.volume import ExtentReader, VolumeStore, ingest_array

comm = MPI.COMM_WORLD
rng = np.random.default_rng(0)
volume = rng.integers(0, 256, size=(37, 50, 61), dtype=np.uint8)  # identical on every rank
path = comm.bcast(tempfile.mkdtemp(prefix="parvox-hist-") if comm.rank == 0 else None)
store = VolumeStore(ingest_array(volume, os.path.join(path, "store"), ndisks=4,
                                 extent=(8, 16, 16), progress=False, comm=comm))
reader = ExtentReader(store, cache_bytes=0)
layout = store.layout


def split(batch_size):
    keys = np.array(list(layout.extents()))
    for start in range(0, len(keys), batch_size):
        yield Token(tuple(range(comm.size)), keys[start : start + batch_size])


def read(keys):
    return [(tuple(k), block) for k, block in reader.read_many(map(tuple, keys))]


def count(blocks):
    hist = np.zeros(256, np.int64)
    ext, shape = np.array(layout.extent), np.array(layout.shape)
    for key, block in blocks:
        lo = np.array(key) * ext
        nz, ny, nx = np.minimum(lo + ext, shape) - lo
        own = block[:nz, :ny, :nx]  # drop the one-voxel overlap (and padding at the edges)
        hist += np.bincount(own.reshape(-1), minlength=256)
    return hist


histogram = Operation(
    "histogram", split, (Stage(read, "read"), Stage(count, "count")),
    merge=lambda acc, h: acc + h, init=lambda batch_size: np.zeros(256, np.int64),
)

with Dataflow([histogram], window=2) as flow:
    if comm.rank == 0:
        hist = flow.run("histogram", 8)
        assert np.array_equal(hist, np.bincount(volume.reshape(-1), minlength=256))
        print(f"{hist.sum()} voxels counted on {comm.size} ranks; "
              f"tokens in flight per rank at most {max(flow.max_inflight)} (window 2)")
reader.close()
store.close()
comm.Barrier()  # every rank has closed the store: remove it
if comm.rank == 0:
    shutil.rmtree(path)
