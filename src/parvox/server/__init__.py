"""``parvox.server``: the parallel slice server (seed 002) -- MPI engine, HTTP API, web viewer.

Start it with ``parvox serve STORE -n 4`` and open the printed URL. See ``docs/server.md``.
"""

from parvox.server.engine import ServerBusy, SliceService, overview_planes
from parvox.server.imaging import display_pixels, encode_image, encode_slice
from parvox.server.params import ParamError, SliceQuery, parse_slice_query

__all__ = [
    "ParamError",
    "ServerBusy",
    "SliceQuery",
    "SliceService",
    "display_pixels",
    "encode_image",
    "encode_slice",
    "overview_planes",
    "parse_slice_query",
]
