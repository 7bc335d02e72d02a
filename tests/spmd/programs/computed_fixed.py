"""Computed indices, corrected: every rank gets all of img (r2a[E: img]), so any row it
reads is there; --verify passes."""
#$spmd init
import numpy as np

rows = 40
img = np.zeros(rows, dtype=np.int64)
#$spmd ronly
img[:] = np.arange(rows) ** 2
#$spmd ronly, r2a[E: img]
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
