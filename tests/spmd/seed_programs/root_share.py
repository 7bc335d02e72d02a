"""Strategy A: the root takes half an equal share of every split, since it also communicates."""

#$spmd init, root_share=0.5
import numpy as np

n = 23
img = np.zeros((n, 5))
out = np.zeros((n, 5))
run = np.zeros(n)
#$spmd ronly
img[...] = np.arange(n * 5, dtype=float).reshape(n, 5) % 7
run[...] = np.arange(n) % 4
#$spmd ronly, r2a[P: img; P: run]
total = 0.0
#$spmd dopar
for i in range(n):
    out[i] = img[i] * 2 + 1
    total += img[i].sum()
#$spmd a2r[P: out], ror[SUM: total]
#$spmd pipe[run, 1]
for i in range(1, n):
    run[i] += run[i - 1]
#$spmd a2r[P: run]
#$spmd ronly
print(out.sum(), total)
print(out[:, 0].tolist())
print(run.tolist())
#$spmd ronly, end
