"""Issue 27, case 2: an array filled inside ronly is used in a dopar loop but never sent."""
#$spmd init
import numpy as np

rows, cols = 53, 29
lut = np.zeros(256, dtype=np.int64)
img = np.zeros((rows, cols), dtype=np.int64)
#$spmd ronly
lut[:] = (np.arange(256) * 7) % 251
img[...] = np.arange(rows * cols).reshape(rows, cols) % 256
#$spmd ronly, r2a[P: img]
out = np.zeros_like(img)
#$spmd dopar
for i in range(rows):
    out[i] = lut[img[i]]
#$spmd a2r[P: out]
#$spmd ronly
print(int(out.sum()))
#$spmd ronly
#$spmd end
