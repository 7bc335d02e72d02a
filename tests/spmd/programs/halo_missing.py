"""Issue 27, case 1: a dopar loop reads the neighbour rows of an array sent without a halo."""
#$spmd init
import numpy as np

rows, cols = 61, 37
img = np.zeros((rows, cols), dtype=np.int64)
#$spmd ronly
img[...] = np.arange(rows * cols).reshape(rows, cols) % 97
#$spmd ronly, r2a[P: img]
out = np.zeros_like(img)
#$spmd dopar
for i in range(1, rows - 1):
    out[i] = img[i - 1] + 2 * img[i] + img[i + 1]
#$spmd a2r[P: out]
#$spmd ronly
print(int((out * out).sum()))
#$spmd ronly
#$spmd end
