"""A hierarchical dataflow: a histogram of tiles, each tile split into rows on other ranks.

Run: ``mpiexec -n 4 python examples/dataflow_nested.py`` (any rank count).

CAP composes parallel constructs: a split/merge may be a stage of another one (seed 002,
section 3). Here the outer operation (``tiles``, started on rank 0) deals tiles of an image to
the ranks in turn. Its one stage is itself an operation (``rows``): on the tile's rank it splits
the tile into rows sent to other ranks, each counted there (``np.bincount``), and merges the
row counts into the tile's histogram on the tile's rank, which sends it back to rank 0 to be
added up. The configuration map (``placement``) runs the rows' counting stage with two threads
on the last rank. The result is checked against NumPy and against ``serial``, the same
functions run one after the other in one process.
"""

import numpy as np
from mpi4py import MPI

from parvox.dataflow import Dataflow, Operation, Stage, Token, serial

comm = MPI.COMM_WORLD
BINS = 16
image = np.random.default_rng(1).integers(0, BINS, size=(101, 67))  # the same on every rank
TILE = 16

rows = Operation(
    "rows",
    split=lambda tile: (Token((int(tile["top"]) + i) % comm.size, row)
                        for i, row in enumerate(tile["pixels"])),
    stages=(Stage(lambda row: np.bincount(row, minlength=BINS), "count"),),
    merge=lambda acc, h: acc + h,
    init=lambda tile: np.zeros(BINS, np.int64),
)
tiles = Operation(
    "tiles",
    split=lambda img: (Token(t % comm.size, {"top": np.int64(top), "pixels": img[top : top + TILE]})
                       for t, top in enumerate(range(0, img.shape[0], TILE))),
    stages=(Stage(rows, "rows", threads=2),),  # the nested operation, run on the tile's rank
    merge=lambda acc, h: acc + h,
    init=lambda img: np.zeros(BINS, np.int64),
)

placement = {"rows/count": {"rank": comm.size - 1, "threads": 2}}
with Dataflow([tiles], window=2, placement=placement) as flow:
    if comm.rank == 0:
        hist = flow.run("tiles", image)
        assert np.array_equal(hist, np.bincount(image.ravel(), minlength=BINS))
        assert np.array_equal(hist, serial(tiles, image))
        print(f"{hist.sum()} pixels in {-(-image.shape[0] // TILE)} tiles of rows counted on "
              f"{comm.size} ranks: equal to NumPy and to the serial run")
