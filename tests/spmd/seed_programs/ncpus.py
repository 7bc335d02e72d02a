"""NCPUS: a 3-row smoothing runs on two ranks only; the others wait and then get its result."""

#$spmd init
import numpy as np

n = 19
img = np.zeros((n, 3))
out = np.zeros((n, 3))
#$spmd ronly
img[...] = np.arange(n * 3.0).reshape(n, 3) % 5
#$spmd ronly
#$spmd ncpus=2, r2a[P(X=1): img]
#$spmd dopar
for i in range(1, n - 1):
    out[i] = img[i - 1] + img[i] + img[i + 1]
#$spmd a2r[P: out]
#$spmd ronly
peak = out.max()
#$spmd ronly
#$spmd ncpus
total = out.sum() + peak
#$spmd ronly
print(out[:, 1].tolist(), peak, total)
#$spmd ronly, end
