"""``parvox.server``: the parallel slice server (seed 002) -- MPI engine, HTTP API, web viewer.

Start it with ``parvox serve STORE -n 4`` and open the printed URL, or call :func:`run_server`
on every rank of an MPI job. See ``docs/server.md``.
"""

from parvox.server.engine import SliceService
from parvox.server.imaging import display_pixels, encode_image, encode_slice
from parvox.server.job import run_server
from parvox.server.options import ServerOptions
from parvox.server.overview import overview_planes
from parvox.server.params import SliceQuery, parse_slice_query
from parvox.server.stats import ServerBusy

__all__ = [
    "ServerBusy",
    "ServerOptions",
    "SliceQuery",
    "SliceService",
    "display_pixels",
    "encode_image",
    "encode_slice",
    "overview_planes",
    "parse_slice_query",
    "run_server",
]
