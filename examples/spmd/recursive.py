"""Causal recursive filters down the rows: node pipelining with ``pipe``.

``smooth[y] = a * smooth[y - 1] + (1 - a) * img[y]`` depends on the row before, so the rows
cannot be split like a ``dopar`` loop: with ``pipe[smooth, 1]`` rank r waits for the last row
of rank r - 1, runs its rows and passes its last row on. The second filter, a 2-D causal
recursion (each value needs its upper, left and upper-left neighbours), is a wavefront:
``pipe[area, 1, 16]`` cuts the columns into chunks of 16 so that rank r + 1 starts a chunk as
soon as rank r has passed it on. Runs as ``python recursive.py`` and as
``parvox spmd run recursive.py -n N``.
"""

#$spmd init
import numpy as np

rows, cols, a, b = 113, 67, 0.8, 0.6
img = np.zeros((rows, cols))
#$spmd ronly
img[...] = np.random.default_rng(11).random((rows, cols))
#$spmd ronly, r2a[P: img]
smooth = np.zeros_like(img)
smooth[0] = img[0]
#$spmd pipe[smooth, 1]
for y in range(1, rows):
    smooth[y] = a * smooth[y - 1] + (1 - a) * img[y]
area = np.zeros_like(img)
area[0, :] = img[0, :]
area[:, 0] = img[:, 0]
#$spmd pipe[area, 1, 16]
for y in range(1, rows):
    for x in range(1, cols):
        area[y, x] = img[y, x] + a * area[y - 1, x] + b * area[y, x - 1] - a * b * area[y - 1, x - 1]
#$spmd a2r[P: smooth; P: area]
#$spmd ronly
np.save("smooth.npy", smooth)
np.save("area.npy", area)
print(f"last row of smooth: mean {smooth[-1].mean():.12f}")
print(f"area: corner {area[-1, -1]:.10f}, sum {area.sum():.6f}")
#$spmd ronly
#$spmd end
