"""Plane parameters given as text: the one parser behind ``parvox slice`` and ``GET /api/slice``.

The parameters are those of the command's options and the HTTP query: ``center=z,y,x`` (voxel
indices), either ``u=z,y,x`` and ``v=z,y,x`` or ``normal=z,y,x`` with an optional
``up=z,y,x``, ``size=H,W``, ``step=S`` (mm) and ``zoom=Z``, and, optional beside them,
``sampling=linear|nearest`` (:data:`~parvox.slicing.SAMPLINGS`). Every error is a
:class:`~parvox.errors.ParameterError` whose :attr:`~parvox.errors.ParameterError.param` is the
parameter's name as listed in :data:`PLANE_PARAMS` (``"u,v"`` for parallel vectors); each front
end turns that name into its own spelling (``--u``, ``?u=``).

Examples
--------
>>> parse_plane({"center": "5,6,7", "normal": "0,-1,0", "size": "4,8"}).v
(1.0, 0.0, 0.0)
>>> try:
...     parse_plane({"center": "5,6,7", "u": "0,0,1", "v": "0,0,-2", "size": "4,8"})
... except ParameterError as exc:
...     print(exc.param)
u,v
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from parvox.errors import ParameterError
from parvox.slicing.plane import MAX_SIZE, MAX_ZOOM, Plane

__all__ = ["PLANE_PARAMS", "parse_floats", "parse_int", "parse_level_param", "parse_plane"]

#: the parameters :func:`parse_plane` reads
PLANE_PARAMS = ("center", "u", "v", "normal", "up", "size", "step", "zoom")

_VEC = "three comma-separated numbers z,y,x"


def parse_floats(
    params: Mapping[str, str | None], name: str, n: int, what: str = _VEC
) -> tuple[float, ...] | None:
    """``n`` finite comma-separated numbers from ``params[name]``; ``None`` when absent.

    Examples
    --------
    >>> parse_floats({"window": "-1.5,2e3"}, "window", 2, "lo,hi")
    (-1.5, 2000.0)
    """
    text = params.get(name)
    if text is None:
        return None
    try:
        values = tuple(float(p) for p in text.split(","))
    except ValueError:
        values = ()
    if len(values) != n:
        raise ParameterError(name, f"{name} must be {what}, got {text!r}")
    if not all(math.isfinite(v) for v in values):
        raise ParameterError(name, f"{name} must be finite numbers, got {text!r}")
    return values


def parse_int(params: Mapping[str, str | None], name: str, default: int, lo: int, hi: int) -> int:
    """An integer in ``[lo, hi]`` from ``params[name]``; ``default`` when absent.

    Examples
    --------
    >>> parse_int({"zoom": "3"}, "zoom", 1, 1, 16), parse_int({}, "zoom", 1, 1, 16)
    (3, 1)
    """
    text = params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ParameterError(name, f"{name} must be an integer, got {text!r}") from None
    if not lo <= value <= hi:
        raise ParameterError(name, f"{name} must be in [{lo}, {hi}], got {value}")
    return value


def parse_level_param(params: Mapping[str, str | None], name: str = "level") -> int | str:
    """The pyramid level asked for: ``"auto"`` when absent, else ``auto`` or an integer >= 0
    (checked against the store when the slice is made).

    Examples
    --------
    >>> parse_level_param({}), parse_level_param({"level": "2"})
    ('auto', 2)
    """
    from parvox.slicing.levels import AUTO, parse_level

    text = params.get(name)
    if text is None:
        return AUTO
    try:
        return parse_level(text)
    except ValueError as exc:
        raise ParameterError(name, str(exc)) from None


def _size(params: Mapping[str, str | None], max_size: int) -> tuple[int, int]:
    text = params.get("size")
    if text is None:
        raise ParameterError("size", "size is required (H,W)")
    try:
        size = tuple(int(p) for p in text.split(","))
    except ValueError:
        size = ()
    if len(size) != 2:
        raise ParameterError("size", f"size must be two integers H,W, got {text!r}")
    if not all(1 <= s <= max_size for s in size):
        raise ParameterError("size", f"size must be in [1, {max_size}] per side, got {text!r}")
    return size[0], size[1]


def _step(params: Mapping[str, str | None]) -> float | None:
    text = params.get("step")
    if text is None:
        return None
    try:
        step = float(text)
    except ValueError:
        raise ParameterError("step", f"step must be a number, got {text!r}") from None
    if not math.isfinite(step) or step <= 0:
        raise ParameterError("step", f"step must be a positive finite number, got {text!r}")
    return step


def parse_plane(
    params: Mapping[str, str | None],
    spacing: Sequence[float] = (1.0, 1.0, 1.0),
    max_size: int = MAX_SIZE,
    max_samples: int | None = None,
) -> Plane:
    """The :class:`Plane` that text ``params`` describe (keys of :data:`PLANE_PARAMS`).

    Parameters
    ----------
    params : mapping of str to str or None
        A missing key and a ``None`` value both mean "not given"; other keys than those of
        :data:`PLANE_PARAMS` and ``sampling`` are ignored.
    spacing : (z, y, x)
        The volume's voxel size (mm).
    max_size : int
        Largest ``H`` or ``W``.
    max_samples : int, optional
        Largest ``H*W*zoom**2`` (the work of one slice); no limit by default.

    Raises
    ------
    ParameterError
        Naming the parameter: a missing or malformed value, non-finite numbers, zero or
        parallel vectors, ``u``/``v`` given with ``normal``, ``up`` without ``normal``, size,
        step or zoom out of range.
    """
    center = parse_floats(params, "center", 3)
    if center is None:
        raise ParameterError("center", "center is required (z,y,x in voxel indices)")
    u, v = parse_floats(params, "u", 3), parse_floats(params, "v", 3)
    normal, up = parse_floats(params, "normal", 3), parse_floats(params, "up", 3)
    if normal is not None and (u is not None or v is not None):
        raise ParameterError("normal", "give either u and v or normal (with optional up), not both")
    if normal is None:
        if u is None or v is None:
            missing = "u" if u is None else "v"
            raise ParameterError(missing, f"{missing} is required (or give normal instead of u and v)")
        if up is not None:
            raise ParameterError("up", "up goes with normal, not with u and v")
    size = _size(params, max_size)
    step = _step(params)
    zoom = parse_int(params, "zoom", 1, 1, MAX_ZOOM)
    if max_samples is not None and size[0] * size[1] * zoom * zoom > max_samples:
        raise ParameterError(
            "zoom",
            f"size x zoom^2 must be at most {max_samples} samples, got {size[0]}x{size[1]}x{zoom}^2",
        )
    sp = tuple(float(s) for s in spacing)
    sampling = (params.get("sampling") or "linear").lower()
    if normal is not None:
        return Plane.from_normal(center, normal, size, up=up, step=step, zoom=zoom, spacing=sp,
                                 sampling=sampling)
    return Plane(_triple(center), _triple(u), _triple(v), size, step, zoom, _triple(sp), sampling)


def _triple(values: Sequence[float] | None) -> tuple[float, float, float]:
    assert values is not None and len(values) == 3
    return float(values[0]), float(values[1]), float(values[2])
