"""List-mode OSEM PET reconstruction with an overlapped image allreduce (seed 000).

The pieces, one module each:

- :mod:`~parvox.recon.geometry`: :class:`ImageGrid`, voxels in mm, axes ``(z, y, x)``;
- :mod:`~parvox.recon.scanner`: a cylindrical :class:`Scanner` with presets, detector pairs
  and their lines of response;
- :mod:`~parvox.recon.projectors`: Siddon and Joseph :func:`forward_project` and their exact
  adjoints :func:`back_project` (compiled, GIL released), and system-matrix :class:`Rows`;
- :mod:`~parvox.recon.phantoms`: IEC body, 3-D Shepp-Logan and Derenzo phantoms, any image;
- :mod:`~parvox.recon.simulate` and :mod:`~parvox.recon.listmode`: list-mode events streamed
  in chunks into a binary file that ranks read in parallel;
- :mod:`~parvox.recon.sensitivity`: ``a = A^T 1`` over all LORs, in parallel, cached;
- :mod:`~parvox.recon.osem`: PSD list-mode OSEM, blocking or with the allreduce of each
  subset overlapped with reading and ray tracing the next one;
- :mod:`~parvox.recon.timing`, :mod:`~parvox.recon.metrics`, :mod:`~parvox.recon.outputs`,
  :mod:`~parvox.recon.acquisition`: timers and eq. 2, NRMSE and contrast recovery, writing
  images and previews, the acquisition directory;
- :mod:`~parvox.recon.smoothing`: a Gaussian post-filter given as a FWHM in mm.

Examples
--------
>>> import tempfile
>>> from parvox import recon
>>> s = recon.Scanner.preset("tiny")
>>> g = recon.default_grid(s)
>>> acq = recon.simulate_acquisition(tempfile.mkdtemp(), recon.make_phantom("iec", g), s,
...                                  counts=20000, seed=0)
>>> a = recon.sensitivity(s, g, mu=acq.mu())
>>> result = recon.osem(acq.events, s, g, a, subsets=2, iterations=2, mode="overlap")
>>> round(float(result.image.sum() / acq.truth().sum()), 1)
1.0
"""

from parvox.recon.acquisition import Acquisition, simulate_acquisition
from parvox.recon.geometry import ImageGrid
from parvox.recon.listmode import ListModeFile, ListModeWriter, read_header, write_events
from parvox.recon.metrics import Scores, Truth, contrast_recovery, nrmse, score
from parvox.recon.osem import OSEMResult, osem
from parvox.recon.outputs import preview, save_image, save_preview
from parvox.recon.phantoms import (
    MU_WATER,
    PHANTOMS,
    Phantom,
    Region,
    image_phantom,
    make_phantom,
    read_activity,
)
from parvox.recon.projectors import Rows, back_project, forward_project, trace_rows
from parvox.recon.scanner import PRESETS, Scanner, default_grid
from parvox.recon.sensitivity import cached_sensitivity, sensitivity
from parvox.recon.simulate import SimulationResult, simulate
from parvox.recon.smoothing import postfilter
from parvox.recon.timing import SubsetTimes, eq2

__all__ = [
    "MU_WATER",
    "PHANTOMS",
    "PRESETS",
    "Acquisition",
    "ImageGrid",
    "ListModeFile",
    "ListModeWriter",
    "OSEMResult",
    "Phantom",
    "Region",
    "Rows",
    "Scanner",
    "Scores",
    "SimulationResult",
    "SubsetTimes",
    "Truth",
    "back_project",
    "cached_sensitivity",
    "contrast_recovery",
    "default_grid",
    "eq2",
    "forward_project",
    "image_phantom",
    "make_phantom",
    "nrmse",
    "osem",
    "postfilter",
    "preview",
    "read_activity",
    "read_header",
    "save_image",
    "save_preview",
    "score",
    "sensitivity",
    "simulate",
    "simulate_acquisition",
    "trace_rows",
    "write_events",
]
