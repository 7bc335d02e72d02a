"""Merge reduction: global histogram and information entropy of a volume (seed 001, Table 1).

The volume is cut into blocks (more blocks than ranks); each block bins its voxels into a
histogram and carries a small summary dict; a merge reduction with k-values ``[4, 2, ...]``
adds them up into block 0, whose rank prints the entropy ``H = -sum p log2 p`` and checks it
against the serial NumPy value.

Run with ``mpiexec -n 4 python examples/entropy.py`` (or plain ``python`` for one rank).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from parvox.blocks import Master, RegularDecomposer, RegularMergePartners, merge_reduce

BINS = 64
shape = (61, 67, 71)
z, y, x = np.ogrid[: shape[0], : shape[1], : shape[2]]
volume = np.sin(z / 7.0) * np.cos(y / 5.0) + 0.3 * np.sin(x / 3.0 + z / 11.0)  # every rank
lo, hi = -1.3, 1.3

nblocks = 6 * MPI.COMM_WORLD.Get_size()
dec = RegularDecomposer(shape, nblocks)
master = Master(dec.nblocks)
dec.decompose(master, lambda gid, core, bounds: volume[tuple(slice(a, b) for a, b in core)])


def summary(block: np.ndarray) -> dict:
    hist, _ = np.histogram(block, bins=BINS, range=(lo, hi))
    return {"hist": hist, "voxels": block.size, "max": float(block.max())}


def merge(a: dict, b: dict) -> dict:
    return {
        "hist": a["hist"] + b["hist"],
        "voxels": a["voxels"] + b["voxels"],
        "max": max(a["max"], b["max"]),
    }


items = {gid: summary(block) for gid, block in master}
result = merge_reduce(master, RegularMergePartners(dec.nblocks, 4), merge, items)


def entropy(hist: np.ndarray) -> float:
    p = hist[hist > 0] / hist.sum()
    return float(-(p * np.log2(p)).sum())


if 0 in result:
    total = result[0]
    serial, _ = np.histogram(volume, bins=BINS, range=(lo, hi))
    assert np.array_equal(total["hist"], serial) and total["voxels"] == volume.size
    print(
        f"{dec.nblocks} blocks on {MPI.COMM_WORLD.Get_size()} ranks: entropy "
        f"{entropy(total['hist']):.6f} bits (serial {entropy(serial):.6f}), max {total['max']:.4f}"
    )
