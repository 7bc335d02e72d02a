"""Strategy B: in a dynamically scheduled loop the root only hands out chunks and collects."""

#$spmd init
import numpy as np

n = 17
lut = np.arange(8.0)
img = np.zeros((n, 4))
#$spmd dodyn[3, img, root_works=False]
for i in range(n):
    img[i] = lut[i % 8] * (i + 1) + np.arange(4)
#$spmd ronly
print(img.sum(axis=1).tolist())
#$spmd ronly, end
