"""A parblock inside an ncpus section inside a function; a section with a loop and a branch."""

#$spmd init
import numpy as np


def work(n):
    a = np.arange(n * 2.0).reshape(n, 2)
    b = np.zeros((n, 2))
    #$spmd ncpus=3
    #$spmd parblock
    if n > 3:
        s = a.sum()
    else:
        s = 0.0
    #$spmd section
    c = a[0] * 7
    #$spmd section
    for k in range(2):
        b[k] = k + 1
    #$spmd parblock
    #$spmd dopar
    for i in range(n):
        b[i] = b[i] + a[i] + s + c.sum()
    #$spmd a2r[P: b]
    #$spmd ncpus
    return b


out = work(9)
#$spmd ronly
print(out.tolist())
#$spmd ronly, end
