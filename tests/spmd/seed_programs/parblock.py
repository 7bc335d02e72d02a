"""PARBLOCK: three independent tasks on one image, one section per rank."""

#$spmd init
import numpy as np

n = 13
img = np.arange(n * 4.0).reshape(n, 4) % 9
#$spmd parblock
hist = np.bincount(img.astype(int).ravel(), minlength=9)
#$spmd section
smooth = (img[:-2] + img[1:-1] + img[2:]) / 3
#$spmd section
edges = np.abs(np.diff(img, axis=0)).sum()
#$spmd parblock
summary = hist.max() + edges
#$spmd ronly
print(hist.tolist(), smooth.sum(), edges, summary)
#$spmd ronly, end
