"""Parse and validate the query of ``GET /api/slice`` (every error names its parameter).

The plane parameters are those of ``parvox slice`` and are parsed by the same function
(:func:`parvox.slicing.parse_plane`): ``center=z,y,x`` (voxel indices), either ``u=z,y,x&v=z,y,x``
or ``normal=z,y,x[&up=z,y,x]``, ``size=H,W``, ``step=S`` (mm), ``zoom=Z``, and the pyramid
``level=auto|K`` (:func:`parvox.slicing.params.parse_level_param`) and
``sampling=linear|nearest`` (a label store is always sampled nearest). The server adds
``format=png|jpeg|npy``, ``quality=Q`` (JPEG, 1-100) and ``window=lo,hi`` (display range for
PNG/JPEG). Unknown parameters are ignored (cache busters).

Examples
--------
>>> q = parse_slice_query({"center": "5,6,7", "normal": "1,0,0", "size": "4,8"})
>>> q.plane.size, q.fmt
((4, 8), 'png')
>>> try:
...     parse_slice_query({"center": "5,6", "normal": "1,0,0", "size": "4,8"})
... except ParameterError as exc:
...     print(exc.param, "|", exc)
center | center must be three comma-separated numbers z,y,x, got '5,6'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from parvox.errors import ParameterError
from parvox.server.imaging import FORMATS
from parvox.slicing import Plane
from parvox.slicing.params import parse_floats, parse_int, parse_level_param, parse_plane

__all__ = ["DEFAULT_MAX_SIZE", "SliceQuery", "parse_slice_query"]

#: largest H or W the server accepts by default
DEFAULT_MAX_SIZE = 2048


@dataclasses.dataclass(frozen=True)
class SliceQuery:
    """A validated slice request: the plane and how to encode it."""

    plane: Plane
    fmt: str = "png"
    quality: int = 90
    window: tuple[float, float] | None = None
    level: int | str = "auto"


def parse_slice_query(
    q: Mapping[str, str],
    spacing: Sequence[float] = (1.0, 1.0, 1.0),
    max_size: int = DEFAULT_MAX_SIZE,
    max_samples: int = 4096 * 4096,
) -> SliceQuery:
    """Validate the query of ``/api/slice`` into a :class:`SliceQuery`.

    Parameters
    ----------
    q : mapping of str to str
    spacing : (z, y, x)
        The volume's voxel size (mm).
    max_size : int
        Largest ``H`` or ``W``.
    max_samples : int
        Largest ``H*W*zoom**2`` (work of one request).

    Raises
    ------
    ParameterError
        Naming the parameter: the plane's (see :func:`parvox.slicing.parse_plane`), an
        unknown format, quality or window out of range.
    """
    plane = parse_plane(q, spacing, max_size=max_size, max_samples=max_samples)
    fmt = q.get("format", "png").lower()
    if fmt == "jpg":
        fmt = "jpeg"
    if fmt not in FORMATS:
        raise ParameterError("format", f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    quality = parse_int(q, "quality", 90, 1, 100)
    window = parse_floats(q, "window", 2, "two comma-separated numbers lo,hi")
    if window is not None and not window[1] > window[0]:
        raise ParameterError("window", f"window must have lo < hi, got {q['window']!r}")
    level = parse_level_param(q)
    return SliceQuery(
        plane, fmt, quality, None if window is None else (window[0], window[1]), level
    )
