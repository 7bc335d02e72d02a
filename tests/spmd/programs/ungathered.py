"""Issue 27, case 3: the results of a dopar loop are used inside ronly but never gathered."""
#$spmd init
import numpy as np

rows, cols = 47, 23
img = np.zeros((rows, cols), dtype=np.int64)
#$spmd ronly
img[...] = np.arange(rows * cols).reshape(rows, cols) % 31
#$spmd ronly, r2a[P: img]
out = np.zeros_like(img)
#$spmd dopar
for i in range(rows):
    out[i] = img[i] * img[i] + i
#$spmd ronly
print(int(out.sum()))
#$spmd ronly
#$spmd end
