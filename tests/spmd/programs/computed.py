"""Computed indices: the checker cannot tell which rows `img[order[i]]` reads (a note), and
at more than one rank they are not all there. ``parvox spmd run --verify`` finds it."""
#$spmd init
import numpy as np

rows = 40
img = np.zeros(rows, dtype=np.int64)
#$spmd ronly
img[:] = np.arange(rows) ** 2
#$spmd ronly, r2a[P: img]
order = (np.arange(rows) * 7) % rows
out = np.zeros(rows, dtype=np.int64)
#$spmd dopar
for i in range(rows):
    out[i] = img[order[i]] + i
#$spmd a2r[P: out]
#$spmd ronly
print("rows", rows)
print("sum", int(out.sum()))
np.save("out.npy", out)
#$spmd ronly
#$spmd end
