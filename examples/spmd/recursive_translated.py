# Translated from recursive.py by `parvox spmd translate`: each #$spmd directive is kept as a
# comment and followed by the runtime calls it became, each after a "# spmd:" comment.
# Edit recursive.py and translate it again rather than editing this file.
# ruff: noqa: E402
"""Causal recursive filters down the rows: node pipelining with ``pipe``.

``smooth[y] = a * smooth[y - 1] + (1 - a) * img[y]`` depends on the row before, so the rows
cannot be split like a ``dopar`` loop: with ``pipe[smooth, 1]`` rank r waits for the last row
of rank r - 1, runs its rows and passes its last row on. The second filter, a 2-D causal
recursion (each value needs its upper, left and upper-left neighbours), is a wavefront:
``pipe[area, 1, 16]`` cuts the columns into chunks of 16 so that rank r + 1 starts a chunk as
soon as rank r has passed it on. Runs as ``python recursive.py`` and as
``parvox spmd run recursive.py -n N``.
"""

from parvox.spmd.runtime import spmd

#$spmd init
# spmd: init -- start the runtime: spmd.rank is this rank of spmd.size, rank 0 is the root
spmd.init()
import numpy as np

rows, cols, a, b = 113, 67, 0.8, 0.6
img = np.zeros((rows, cols))
#$spmd ronly
# spmd: ronly -- only the root runs the lines up to the closing ronly
if spmd.is_root:
    img[...] = np.random.default_rng(11).random((rows, cols))
#$spmd ronly, r2a[P: img]
# spmd: ronly -- end of the root-only region
# spmd: r2a -- the root sends each rank its part of img
spmd.r2a_part(img)
smooth = np.zeros_like(img)
smooth[0] = img[0]
#$spmd pipe[smooth, 1]
# spmd: pipe -- each rank waits for the 1 row of smooth above its part, runs its part, then passes its last 1 row on
for y in spmd.pipe_range(range(1, rows), smooth, carry=1):
    smooth[y] = a * smooth[y - 1] + (1 - a) * img[y]
area = np.zeros_like(img)
area[0, :] = img[0, :]
area[:, 0] = img[:, 0]
#$spmd pipe[area, 1, 16]
# spmd: pipe -- a wavefront: the columns go in chunks of 16; each rank takes a chunk's 1 row of area from the rank before, runs its rows on it and passes it on
for spmd_rows, spmd_cols in spmd.pipe_tiles(range(1, rows), range(1, cols), area, carry=1, chunk=16):
    for y in spmd_rows:
        for x in spmd_cols:
            area[y, x] = img[y, x] + a * area[y - 1, x] + b * area[y, x - 1] - a * b * area[y - 1, x - 1]
#$spmd a2r[P: smooth; P: area]
# spmd: a2r -- every rank sends its part of smooth to the root
spmd.a2r_part(smooth)
# spmd: a2r -- every rank sends its part of area to the root
spmd.a2r_part(area)
#$spmd ronly
# spmd: ronly -- only the root runs the lines up to the closing ronly
if spmd.is_root:
    np.save("smooth.npy", smooth)
    np.save("area.npy", area)
    print(f"last row of smooth: mean {smooth[-1].mean():.12f}")
    print(f"area: corner {area[-1, -1]:.10f}, sum {area.sum():.6f}")
#$spmd ronly
# spmd: ronly -- end of the root-only region
#$spmd end
# spmd: end -- wait for every rank, then finish the runtime
spmd.end()
