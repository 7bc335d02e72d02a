"""Parse and validate the query of ``GET /api/slice`` (every error names its parameter).

The parameters mean what the options of ``parvox slice`` mean: ``center=z,y,x`` (voxel indices),
either ``u=z,y,x&v=z,y,x`` or ``normal=z,y,x[&up=z,y,x]``, ``size=H,W``, ``step=S`` (mm),
``zoom=Z``, ``format=png|jpeg|npy``, ``quality=Q`` (JPEG, 1-100) and ``window=lo,hi`` (display
range for PNG/JPEG). Unknown parameters are ignored (cache busters).

Examples
--------
>>> q = parse_slice_query({"center": "5,6,7", "normal": "1,0,0", "size": "4,8"})
>>> q.plane.size, q.fmt
((4, 8), 'png')
>>> try:
...     parse_slice_query({"center": "5,6", "normal": "1,0,0", "size": "4,8"})
... except ParamError as exc:
...     print(exc.param, "|", exc)
center | center must be three comma-separated numbers z,y,x, got '5,6'
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from parvox.server.imaging import FORMATS
from parvox.slicing import MAX_ZOOM, Plane

__all__ = ["DEFAULT_MAX_SIZE", "ParamError", "SliceQuery", "parse_slice_query"]

#: largest H or W the server accepts by default
DEFAULT_MAX_SIZE = 2048


class ParamError(ValueError):
    """A bad query parameter; :attr:`param` names it."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


@dataclasses.dataclass(frozen=True)
class SliceQuery:
    """A validated slice request: the plane and how to encode it."""

    plane: Plane
    fmt: str = "png"
    quality: int = 90
    window: tuple[float, float] | None = None


def _floats(q: Mapping[str, str], name: str, n: int, what: str) -> tuple[float, ...] | None:
    text = q.get(name)
    if text is None:
        return None
    parts = text.split(",")
    try:
        vals = tuple(float(p) for p in parts)
    except ValueError:
        vals = ()
    if len(vals) != n:
        raise ParamError(name, f"{name} must be {what}, got {text!r}")
    if not all(math.isfinite(v) for v in vals):
        raise ParamError(name, f"{name} must be finite numbers, got {text!r}")
    return vals


def _int(q: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    text = q.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ParamError(name, f"{name} must be an integer, got {text!r}") from None
    if not lo <= value <= hi:
        raise ParamError(name, f"{name} must be in [{lo}, {hi}], got {value}")
    return value


_VEC = "three comma-separated numbers z,y,x"


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
    ParamError
        Naming the parameter: missing or non-finite numbers, zero or parallel vectors, size,
        zoom, quality or window out of range, unknown format.
    """
    center = _floats(q, "center", 3, _VEC)
    if center is None:
        raise ParamError("center", "center is required (z,y,x in voxel indices)")
    u, v = _floats(q, "u", 3, _VEC), _floats(q, "v", 3, _VEC)
    normal, up = _floats(q, "normal", 3, _VEC), _floats(q, "up", 3, _VEC)
    if normal is not None and (u is not None or v is not None):
        raise ParamError("normal", "give either u and v or normal (with optional up), not both")
    if normal is None and (u is None or v is None):
        missing = "u" if u is None else "v"
        raise ParamError(missing, f"{missing} is required (or give normal instead of u and v)")
    size_text = q.get("size")
    if size_text is None:
        raise ParamError("size", "size is required (H,W)")
    try:
        size = tuple(int(p) for p in size_text.split(","))
    except ValueError:
        size = ()
    if len(size) != 2:
        raise ParamError("size", f"size must be two integers H,W, got {size_text!r}")
    if not all(1 <= s <= max_size for s in size):
        raise ParamError("size", f"size must be in [1, {max_size}] per side, got {size_text!r}")
    step = None
    if q.get("step") is not None:
        try:
            step = float(q["step"])
        except ValueError:
            raise ParamError("step", f"step must be a number, got {q['step']!r}") from None
        if not math.isfinite(step) or step <= 0:
            raise ParamError("step", f"step must be a positive finite number, got {q['step']!r}")
    zoom = _int(q, "zoom", 1, 1, MAX_ZOOM)
    if size[0] * size[1] * zoom * zoom > max_samples:
        raise ParamError(
            "zoom", f"size x zoom^2 must be at most {max_samples} samples, got "
            f"{size[0]}x{size[1]}x{zoom}^2"
        )
    fmt = q.get("format", "png").lower()
    if fmt == "jpg":
        fmt = "jpeg"
    if fmt not in FORMATS:
        raise ParamError("format", f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    quality = _int(q, "quality", 90, 1, 100)
    window = _floats(q, "window", 2, "two comma-separated numbers lo,hi")
    if window is not None and not window[1] > window[0]:
        raise ParamError("window", f"window must have lo < hi, got {q['window']!r}")
    try:
        if normal is not None:
            plane = Plane.from_normal(
                center, normal, size, up=up, step=step, zoom=zoom, spacing=tuple(spacing)
            )
        else:
            plane = Plane(center, u, v, size, step, zoom, tuple(spacing))  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        text = str(exc)
        first = text.split(" ", 1)[0]
        if text.startswith("u and v"):
            param = "u,v"
        elif text.startswith("up must not be parallel"):
            param = "up"
        else:
            param = first if first in ("u", "v", "normal", "up", "step", "zoom") else "plane"
        raise ParamError(param, text) from None
    return SliceQuery(plane, fmt, quality, window)  # type: ignore[arg-type]
