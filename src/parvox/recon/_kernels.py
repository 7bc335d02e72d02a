"""Compiled ray tracers (Siddon, Joseph) and the loops built on them.

Each tracer walks one line and writes the voxels it touches with their weights into two
scratch arrays (flat voxel index, weight in mm), returning how many it wrote. Every operation
-- forward projection, back-projection, system-matrix rows, the EM step -- is a loop over lines
around the same tracer, so all of them use exactly the same weights: the back-projector is the
exact adjoint of the forward projector, and rows stored in memory reproduce the on-the-fly
result bit for bit (for lines in the same order: :func:`line_order` is the order the
projectors use).

Geometry arguments, shared by all kernels:

``shape`` (int64[3])
    Voxels per axis ``(z, y, x)``.
``lo`` (float64[3])
    The grid's low corner in mm (``origin - voxel_size / 2``).
``vox`` (float64[3])
    Voxel size in mm.
``method``
    :data:`SIDDON` or :data:`JOSEPH`.

Every kernel is ``numba.njit(nogil=True, cache=True)``: it releases the GIL, so reading files
and progressing communication in other threads overlap it.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = [
    "JOSEPH",
    "SIDDON",
    "back",
    "EM_PREFETCH",
    "em_apply",
    "em_count",
    "em_image_update",
    "em_log",
    "em_rows",
    "forward",
    "line_order",
    "line_planes",
    "rows_back",
    "rows_forward",
    "scratch_size",
    "trace_rows",
]

SIDDON = 0
JOSEPH = 1


def scratch_size(shape: tuple[int, ...], method: int) -> int:
    """The most (index, weight) pairs one line can produce on a grid of ``shape``.

    Examples
    --------
    >>> scratch_size((4, 5, 6), SIDDON), scratch_size((4, 5, 6), JOSEPH)
    (18, 24)
    """
    if method == SIDDON:
        return int(sum(shape)) + 3
    return 4 * int(max(shape))


def _prefetch_intrinsic(typingctx, array, index):  # pragma: no cover - compiled
    """Hint the CPU to load ``array[index]``'s cache line (``llvm.prefetch``, read, keep in
    all levels); no effect on results, and no fault for any index."""
    sig = types.void(array, index)

    def codegen(context, builder, signature, args):
        aty = signature.args[0]
        ary = context.make_array(aty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aty, ary, [args[1]], wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


#: ``_prefetch(array, index)`` in compiled code
_prefetch: Any = intrinsic(_prefetch_intrinsic)


@numba.njit(nogil=True, cache=True, inline="always")
def _entry(p, d, tmin, length, lo, vox, n):  # pragma: no cover - compiled
    """Along one axis: the voxel the line enters at distance ``tmin`` (mm) from its start, the
    step (+-1), and the distance of plane ``j`` as ``base + j * inc`` (in mm, so that an
    axis-aligned line gets exactly the voxel size per voxel)."""
    u = (p + tmin / length * d - lo) / vox
    k = int(math.ceil(u)) - 1 if d < 0.0 else int(math.floor(u))  # noqa: RUF046 (numba)
    k = min(max(k, 0), n - 1)
    if d == 0.0:
        return k, 0, np.inf, 0.0
    scale = length / d
    return k, (1 if d > 0.0 else -1), (lo - p) * scale, vox * scale


@numba.njit(nogil=True, cache=True, inline="always")
def _events_before(base, f, step, inc, x, left):  # pragma: no cover - compiled
    """How many of the plane crossings ``base + (f + j * step) * inc`` (``j = 0, 1, ...``, in
    :func:`_siddon`'s order: non-decreasing) are below ``x``; at most ``left + 1``."""
    if step == 0:
        return 0
    est = ((x - base) / inc - f) * step
    est = min(max(est, 0.0), left + 1.0)
    j = int(est)
    while j > 0 and base + (f + (j - 1) * step) * inc >= x:
        j -= 1
    while j <= left and base + (f + j * step) * inc < x:
        j += 1
    return j


@numba.njit(nogil=True, cache=True)
def _siddon(starts, ends, i, shape, lo, vox, idx, w, image, pf_lo, pf_hi, z_lo,  # pragma: no cover
            z_hi):
    """Exact intersection lengths of line ``i`` with every voxel it crosses (Siddon/Jacobs).

    Positions along the line are distances in mm from its start. The voxels with
    ``pf_lo <= index < pf_hi`` are prefetched from ``image`` as they are found (see
    :func:`forward`). The trace stops where the line leaves the planes ``z_lo <= k < z_hi``
    of axis 0 for good (its plane index is monotone): the pairs before are the same.
    """
    p0 = starts[i]
    p1 = ends[i]
    d0 = p1[0] - p0[0]
    d1 = p1[1] - p0[1]
    d2 = p1[2] - p0[2]
    length = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    if length == 0.0:
        return 0
    tmin = 0.0
    tmax = length
    for a in range(3):
        da = d0 if a == 0 else (d1 if a == 1 else d2)
        hi = lo[a] + shape[a] * vox[a]
        if da == 0.0:
            if p0[a] < lo[a] or p0[a] >= hi:
                return 0
        else:
            scale = length / da
            t0 = (lo[a] - p0[a]) * scale
            t1 = (hi - p0[a]) * scale
            if t0 > t1:
                t0, t1 = t1, t0
            tmin = max(tmin, t0)
            tmax = min(tmax, t1)
    if tmin >= tmax:
        return 0
    n0, n1, n2 = shape[0], shape[1], shape[2]
    k0, s0, b0, i0 = _entry(p0[0], d0, tmin, length, lo[0], vox[0], n0)
    k1, s1, b1, i1 = _entry(p0[1], d1, tmin, length, lo[1], vox[1], n1)
    k2, s2, b2, i2 = _entry(p0[2], d2, tmin, length, lo[2], vox[2], n2)
    # the next plane crossed along an axis is k + 1 going up, k going down
    e0 = (1 + s0) // 2
    e1 = (1 + s1) // 2
    e2 = (1 + s2) // 2
    x0 = b0 + (k0 + e0) * i0 if s0 else np.inf
    x1 = b1 + (k1 + e1) * i1 if s1 else np.inf
    x2 = b2 + (k2 + e2) * i2 if s2 else np.inf
    # the flat index moves by a fixed stride per plane crossed
    st0 = s0 * n1 * n2
    st1 = s1 * n2
    voxel = (k0 * n1 + k1) * n2 + k2
    # planes as floats (k + e, exact), so that a step is an add, not a conversion; and the
    # steps left before the line leaves the grid (axis 0: the planes [z_lo, z_hi)) per axis
    f0 = float(k0 + e0)
    f1 = float(k1 + e1)
    f2 = float(k2 + e2)
    left0 = z_hi - 1 - k0 if s0 > 0 else k0 - z_lo  # axis 0: to the run's last plane
    left1 = n1 - 1 - k1 if s1 > 0 else k1
    left2 = n2 - 1 - k2 if s2 > 0 else k2
    if (k0 >= z_hi and s0 >= 0) or (k0 < z_lo and s0 <= 0):
        return 0
    cur = tmin
    if (s0 > 0 and k0 < z_lo) or (s0 < 0 and k0 >= z_hi):
        # start where the line enters the planes [z_lo, z_hi): the state the loop below has
        # after that crossing (every value the loop computes, computed the same way), so the
        # pairs from there on are the same; the pairs before lie in other planes
        fx = float(z_lo) if s0 > 0 else float(z_hi)
        c0 = z_lo - k0 if s0 > 0 else k0 - z_hi + 1  # axis-0 steps up to it, it included
        cross = b0 + fx * i0
        if cross >= tmax:
            return 0
        c1 = _events_before(b1, f1, s1, i1, cross, left1)
        c2 = _events_before(b2, f2, s2, i2, cross, left2)
        if c1 > left1 or c2 > left2:
            return 0  # the line leaves the grid before
        left0 -= c0
        left1 -= c1
        left2 -= c2
        voxel += c0 * st0 + c1 * st1 + c2 * s2
        f0 = fx + s0
        x0 = b0 + f0 * i0
        if c1:
            f1 += c1 * s1
            x1 = b1 + f1 * i1
        if c2:
            f2 += c2 * s2
            x2 = b2 + f2 * i2
        cur = cross
    # one step per plane crossed: the segment up to the next crossing, then the crossing; each
    # axis's branch does both (one unpredictable branch per step), the pair is written always
    # and kept when its segment is not empty (no branch); voxels are prefetched when in
    # [pf_lo, pf_hi) (one unsigned compare)
    span = np.uint64(pf_hi - pf_lo) if pf_hi > pf_lo else np.uint64(0)
    n = 0
    while True:
        if x0 <= x1 and x0 <= x2:
            seg = min(x0, tmax) - cur
            if np.uint64(voxel - pf_lo) < span:
                _prefetch(image, voxel)
            un = np.uint64(n)
            idx[un] = voxel
            w[un] = seg
            n += seg > 0.0
            if x0 >= tmax or left0 == 0:
                break
            cur = x0
            left0 -= 1
            voxel += st0
            f0 += s0
            x0 = b0 + f0 * i0
        elif x1 <= x2:
            seg = min(x1, tmax) - cur
            if np.uint64(voxel - pf_lo) < span:
                _prefetch(image, voxel)
            un = np.uint64(n)
            idx[un] = voxel
            w[un] = seg
            n += seg > 0.0
            if x1 >= tmax or left1 == 0:
                break
            cur = x1
            left1 -= 1
            voxel += st1
            f1 += s1
            x1 = b1 + f1 * i1
        else:
            seg = min(x2, tmax) - cur
            if np.uint64(voxel - pf_lo) < span:
                _prefetch(image, voxel)
            un = np.uint64(n)
            idx[un] = voxel
            w[un] = seg
            n += seg > 0.0
            if x2 >= tmax or left2 == 0:
                break
            cur = x2
            left2 -= 1
            voxel += s2
            f2 += s2
            x2 = b2 + f2 * i2
    return n


@numba.njit(nogil=True, cache=True, inline="always")
def _pick(v, a):  # pragma: no cover - compiled
    return v[0] if a == 0 else (v[1] if a == 1 else v[2])


@numba.njit(nogil=True, cache=True, inline="always")
def _first_above(u0, du, x, inclusive, ka, kb):  # pragma: no cover - compiled
    """The first ``k`` in ``[ka, kb]`` with ``u0 + k * du > x`` (``>=`` if ``inclusive``), for
    ``du > 0`` (the values rise with ``k``, rounding included); ``kb`` if none."""
    est = (x - u0) / du
    est = min(max(est, ka - 1.0), kb + 1.0)  # a finite int below
    j = min(max(int(math.floor(est)), ka), kb)  # noqa: RUF046 (numba typing)
    while j > ka and (u0 + (j - 1) * du > x or (inclusive and u0 + (j - 1) * du == x)):
        j -= 1
    while j < kb and not (u0 + j * du > x or (inclusive and u0 + j * du == x)):
        j += 1
    return j


@numba.njit(nogil=True, cache=True)
def _inside(u0, du, low, high, ka, kb):  # pragma: no cover - compiled
    """The run ``[a, b)`` of the ``k`` in ``[ka, kb)`` with ``low < u0 + k * du < high``: one
    run, as ``u0 + k * du`` is monotone in ``k`` (``-(u0 + k du) == -u0 + k (-du)`` exactly,
    so a falling line is a rising one negated)."""
    if du == 0.0:
        if low < u0 and u0 < high:
            return ka, kb
        return ka, ka
    if du < 0.0:
        u0, du, low, high = -u0, -du, -high, -low
    a = _first_above(u0, du, low, False, ka, kb)
    b = _first_above(u0, du, high, True, ka, kb)
    return a, max(a, b)


@numba.njit(nogil=True, cache=True, inline="always")
def _joseph_plane(k, ub, uc, factor, sa, sb, sc, nb, nc, fnb, fnc, idx, w,  # pragma: no cover
                  n):
    """Plane ``k``'s nonzero pairs (of its four bilinear neighbours, those inside the grid)
    written from ``idx[n]``, ``w[n]``; returns the new count."""
    # outside the box: ub < -0.5 or ub > nb - 0.5 (same for c)
    if ub < -0.5 or ub > fnb - 0.5 or uc < -0.5 or uc > fnc - 0.5:
        return n
    jb = int(math.floor(ub))  # noqa: RUF046 (numba typing)
    jc = int(math.floor(uc))  # noqa: RUF046
    fb = ub - jb
    fc = uc - jc
    gc = 1.0 - fc
    v00 = k * sa + jb * sb + jc * sc  # voxel (jb, jc); the others are strides away
    low_c = jc >= 0
    high_c = jc + 1 < nc
    if jb >= 0:
        wb = factor * (1.0 - fb)
        if low_c and wb * gc > 0.0:
            idx[n] = v00
            w[n] = wb * gc
            n += 1
        if high_c and wb * fc > 0.0:
            idx[n] = v00 + sc
            w[n] = wb * fc
            n += 1
    if jb + 1 < nb:
        wb = factor * fb
        if low_c and wb * gc > 0.0:
            idx[n] = v00 + sb
            w[n] = wb * gc
            n += 1
        if high_c and wb * fc > 0.0:
            idx[n] = v00 + sb + sc
            w[n] = wb * fc
            n += 1
    return n


@numba.njit(nogil=True, cache=True, inline="always")
def _joseph_setup(starts, ends, i, shape, lo, vox, z_lo, z_hi):  # pragma: no cover - compiled
    """Line ``i``'s Joseph geometry: its planes ``k0 <= k <= k1`` of the dominant axis ``a``
    (none when ``k1 < k0``), the run ``ka <= k < kb`` of those whose four neighbours all lie
    inside the grid, where plane ``k`` meets the line at ``ub = ub0 + k * dub``,
    ``uc = uc0 + k * duc`` (voxel units of the other axes ``b``, ``c``), the length per plane
    ``factor`` (mm), the flat strides ``sa, sb, sc``, and ``nb, nc`` as ints and floats."""
    p0 = starts[i]
    p1 = ends[i]
    d0 = p1[0] - p0[0]
    d1 = p1[1] - p0[1]
    d2 = p1[2] - p0[2]
    length = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    if length == 0.0:
        return 0, -1, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0, 0.0, 0.0
    r0 = abs(d0) / vox[0]
    r1 = abs(d1) / vox[1]
    r2 = abs(d2) / vox[2]
    if r0 >= r1 and r0 >= r2:
        a, b, c = 0, 1, 2
    elif r1 >= r2:
        a, b, c = 1, 0, 2
    else:
        a, b, c = 2, 0, 1
    delta = (d0, d1, d2)
    da = _pick(delta, a)
    db = _pick(delta, b)
    dc = _pick(delta, c)
    pa, pb, pc = p0[a], p0[b], p0[c]
    va, vb, vc = vox[a], vox[b], vox[c]
    lob, loc = lo[b], lo[c]
    na, nb, nc = shape[a], shape[b], shape[c]
    strides = (shape[1] * shape[2], shape[2], 1)
    sa = _pick(strides, a)
    sb = _pick(strides, b)
    sc = _pick(strides, c)
    org_a = lo[a] + 0.5 * va
    lo_a = min(pa, p1[a])
    hi_a = max(pa, p1[a])
    k0 = max(int(math.ceil((lo_a - org_a) / va)), 0)  # noqa: RUF046 (numba typing)
    k1 = min(int(math.floor((hi_a - org_a) / va)), na - 1)  # noqa: RUF046
    factor = va * length / abs(da)
    t0 = (org_a - pa) / da
    dt = va / da
    # plane k meets the line at (pb + t db, pc + t dc), t = t0 + k dt; in voxel units of b, c:
    ub0 = (pb + t0 * db - lob) / vb - 0.5
    uc0 = (pc + t0 * dc - loc) / vc - 0.5
    dub = dt * db / vb
    duc = dt * dc / vc
    fnb = float(nb)
    fnc = float(nc)
    if a == 0:
        k0 = max(k0, z_lo)
        k1 = min(k1, z_hi - 1)
    elif dub != 0.0 and (z_lo > 0 or z_hi < nb):
        # axis 0 is b: plane k writes rows floor(ub) and floor(ub) + 1 of it
        ka = (z_lo - 1.5 - ub0) / dub
        kb = (z_hi + 0.5 - ub0) / dub
        if ka > kb:
            ka, kb = kb, ka
        ka = min(max(ka, k0 - 1.0), k1 + 1.0)  # finite ints below
        kb = min(max(kb, k0 - 1.0), k1 + 1.0)
        k0 = max(k0, int(math.floor(ka)) - 1)  # noqa: RUF046 (numba typing)
        k1 = min(k1, int(math.ceil(kb)) + 1)  # noqa: RUF046
    elif z_lo > 0 or z_hi < nb:
        if ub0 < z_lo - 1.5 or ub0 > z_hi + 0.5:
            return 0, -1, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0, 0.0, 0.0
    # the planes whose four neighbours all lie inside (ub in (0, nb - 1), uc in (0, nc - 1))
    # form one run [ka, kb): ub0 + k * dub is monotone in k, rounding included
    ka, kb = _inside(ub0, dub, 0.0, fnb - 1.0, k0, k1 + 1)
    kc, kd = _inside(uc0, duc, 0.0, fnc - 1.0, k0, k1 + 1)
    ka = max(ka, kc)
    kb = max(min(kb, kd), ka)
    return k0, k1, ka, kb, ub0, dub, uc0, duc, factor, sa, sb, sc, nb, nc, fnb, fnc


@numba.njit(nogil=True, cache=True)
def _joseph_planes(k_from, k_to, ub0, dub, uc0, duc, factor, sa, sb, sc, nb, nc, fnb, fnc,  # pragma: no cover
                   idx, w, n):
    """:func:`_joseph_plane` for the planes ``k_from <= k < k_to``; returns the new count."""
    for k in range(k_from, k_to):
        n = _joseph_plane(k, ub0 + k * dub, uc0 + k * duc, factor, sa, sb, sc, nb, nc, fnb, fnc,
                          idx, w, n)
    return n


@numba.njit(nogil=True, cache=True)
def _joseph(starts, ends, i, shape, lo, vox, idx, w, image, pf_lo, pf_hi, z_lo,  # pragma: no cover
            z_hi):
    """Joseph's method: bilinear interpolation in every voxel-centre plane of the dominant axis.

    Outside the grid's box the image is 0: a plane point that lies outside the box in either
    interpolated axis contributes nothing, so a line that misses the grid gives 0. Prefetches
    as :func:`_siddon` does. Only the planes of the dominant axis whose pairs can lie in the
    planes ``z_lo <= k < z_hi`` of axis 0 are visited (with half a voxel to spare): each plane's
    pairs are computed on their own, so they are the same.
    """
    k0, k1, ka, kb, ub0, dub, uc0, duc, factor, sa, sb, sc, nb, nc, fnb, fnc = _joseph_setup(
        starts, ends, i, shape, lo, vox, z_lo, z_hi)
    n = 0
    n = _joseph_planes(k0, ka, ub0, dub, uc0, duc, factor, sa, sb, sc, nb, nc, fnb, fnc,
                       idx, w, n)
    fk = float(ka)  # == k, exactly: ub below is the ub0 + k * dub of the other planes
    base = ka * sa
    for k in range(ka, kb):
        ub = ub0 + fk * dub
        uc = uc0 + fk * duc
        fk += 1.0
        flb = math.floor(ub)
        flc = math.floor(uc)
        fb = ub - flb
        fc = uc - flc
        gc = 1.0 - fc
        v00 = base + int(flb) * sb + int(flc) * sc  # voxel (jb, jc); the others strides away
        base += sa
        wb = factor * (1.0 - fb)
        wf = factor * fb
        w00 = wb * gc
        w01 = wb * fc
        w10 = wf * gc
        w11 = wf * fc
        if w00 > 0.0 and w01 > 0.0 and w10 > 0.0 and w11 > 0.0:
            if v00 >= pf_lo and v00 < pf_hi:
                _prefetch(image, v00)
                _prefetch(image, v00 + sc)
                _prefetch(image, v00 + sb)
                _prefetch(image, v00 + sb + sc)
            idx[n] = v00
            w[n] = w00
            idx[n + 1] = v00 + sc
            w[n + 1] = w01
            idx[n + 2] = v00 + sb
            w[n + 2] = w10
            idx[n + 3] = v00 + sb + sc
            w[n + 3] = w11
            n += 4
        else:  # a neighbour on a plane (a zero weight): only the nonzero pairs
            n = _joseph_plane(k, ub, uc, factor, sa, sb, sc, nb, nc, fnb, fnc, idx, w, n)
    n = _joseph_planes(kb, k1 + 1, ub0, dub, uc0, duc, factor, sa, sb, sc, nb, nc, fnb, fnc,
                       idx, w, n)
    return n


@numba.njit(nogil=True, cache=True)
def _joseph_split(starts, ends, i, shape, lo, vox, idx, w, pv, pw, z_lo, z_hi):  # pragma: no cover
    """:func:`_joseph`'s pairs of line ``i`` in a form the projectors read faster.

    The planes before the run of planes whose four neighbours all lie inside (see
    :func:`_joseph`) give their pairs in ``idx[:n_pre]``, ``w[:n_pre]``; the run's ``m``
    planes give ``pv[p]`` (the voxel ``v`` of neighbour ``(jb, jc)``) and ``pw[0..3, p]``, the
    weights of the voxels ``v, v + sc, v + sb, v + sb + sc`` (in :func:`_joseph`'s pair order);
    the planes after the run give their pairs in ``idx[n_pre:n]``, ``w[n_pre:n]``. The run is
    computed by a loop without branches (SIMD); where one of its weights is 0 (a line through
    voxel centres) its planes are given as pairs instead (``m = 0``). Pairs and weights are
    :func:`_joseph`'s, bit for bit. Returns ``(n_pre, n, m, sb, sc)``. No prefetch: the
    projectors prefetch the run of the next line while they use this one's.
    """
    k0, k1, ka, kb, ub0, dub, uc0, duc, factor, sa, sb, sc, nb, nc, fnb, fnc = _joseph_setup(
        starts, ends, i, shape, lo, vox, z_lo, z_hi)
    n = 0
    n = _joseph_planes(k0, ka, ub0, dub, uc0, duc, factor, sa, sb, sc, nb, nc, fnb, fnc,
                       idx, w, n)
    n_pre = n
    m = kb - ka
    fka = float(ka)
    base = ka * sa
    good = 0
    for p in range(m):
        fk = fka + p  # == float(ka + p): the ub0 + k * dub of _joseph
        ub = ub0 + fk * dub
        uc = uc0 + fk * duc
        flb = np.floor(ub)
        flc = np.floor(uc)
        fb = ub - flb
        fc = uc - flc
        gc = 1.0 - fc
        wb = factor * (1.0 - fb)
        wf = factor * fb
        w00 = wb * gc
        w01 = wb * fc
        w10 = wf * gc
        w11 = wf * fc
        pv[p] = base + p * sa + int(flb) * sb + int(flc) * sc
        pw[0, p] = w00
        pw[1, p] = w01
        pw[2, p] = w10
        pw[3, p] = w11
        good += (w00 > 0.0) & (w01 > 0.0) & (w10 > 0.0) & (w11 > 0.0)
    if good != m:  # a zero weight: the run's planes as pairs, as _joseph gives them
        n = _joseph_planes(ka, kb, ub0, dub, uc0, duc, factor, sa, sb, sc, nb, nc, fnb, fnc, idx,
                           w, n)
        m = 0
    n = _joseph_planes(kb, k1 + 1, ub0, dub, uc0, duc, factor, sa, sb, sc, nb, nc, fnb, fnc,
                       idx, w, n)
    return n_pre, n, m, sb, sc


@numba.njit(nogil=True, cache=True, inline="always")
def _dot_split(image, idx, w, n_pre, n, pv, pw, m, sb, sc, pv2, m2, sb2,  # pragma: no cover
               sc2):
    """:func:`_dot` of :func:`_joseph_split`'s parts, bit for bit: the pairs in the order
    prefix, run (plane by plane, four pairs each), suffix, pair ``k`` to sum ``k % 4``.

    Prefetches the voxels of the next line's run (``pv2[:m2]``, strides ``sb2``, ``sc2``) as it
    goes: spread over the sum, the misses load while it computes (a burst of them would stall
    on the few misses a core can have in flight)."""
    s0, s1, s2, s3 = _sums(image, idx, w, 0, n_pre, 0.0, 0.0, 0.0, 0.0)
    # the run and the suffix: their j-th pair goes to sum (n_pre + j) % 4, u[j % 4] below
    r = n_pre & 3
    if r == 0:
        u0, u1, u2, u3 = s0, s1, s2, s3
    elif r == 1:
        u0, u1, u2, u3 = s1, s2, s3, s0
    elif r == 2:
        u0, u1, u2, u3 = s2, s3, s0, s1
    else:
        u0, u1, u2, u3 = s3, s0, s1, s2
    for p in range(m):
        if p < m2:
            _prefetch_run(image, pv2, p, sb2, sc2, 0, 0, True)
        v = pv[p]
        u0 += pw[0, p] * image[np.uint64(v)]
        u1 += pw[1, p] * image[np.uint64(v + sc)]
        u2 += pw[2, p] * image[np.uint64(v + sb)]
        u3 += pw[3, p] * image[np.uint64(v + sb + sc)]
    for p in range(m, m2):
        _prefetch_run(image, pv2, p, sb2, sc2, 0, 0, True)
    u0, u1, u2, u3 = _sums(image, idx, w, n_pre, n, u0, u1, u2, u3)
    if r == 0:
        s0, s1, s2, s3 = u0, u1, u2, u3
    elif r == 1:
        s1, s2, s3, s0 = u0, u1, u2, u3
    elif r == 2:
        s2, s3, s0, s1 = u0, u1, u2, u3
    else:
        s3, s0, s1, s2 = u0, u1, u2, u3
    return (s0 + s1) + (s2 + s3)


@numba.njit(nogil=True, cache=True)
def _forward_joseph(image, starts, ends, shape, lo, vox, out):  # pragma: no cover - compiled
    """:func:`forward` for Joseph through :func:`_joseph_split` (the same values, bit for bit):
    line ``i + 1`` is traced, then line ``i`` summed while line ``i + 1``'s run is prefetched."""
    n_lines = starts.shape[0]
    bound = scratch_size_joseph(shape)
    planes = max(shape[0], shape[1], shape[2])
    idx = np.empty((2, bound), np.int64)
    w = np.empty((2, bound), np.float64)
    pv = np.empty((2, planes), np.int64)
    pw = np.empty((2, 4, planes), np.float64)
    if n_lines == 0:
        return
    n0 = shape[0]
    n_pre, n, m, sb, sc = _joseph_split(starts, ends, 0, shape, lo, vox, idx[0], w[0], pv[0],
                                        pw[0], 0, n0)
    for i in range(n_lines):
        b = i & 1
        cur_pre, cur_n, cur_m, cur_sb, cur_sc = n_pre, n, m, sb, sc
        m = 0
        if i + 1 < n_lines:  # traced without prefetching: _dot_split prefetches its run
            n_pre, n, m, sb, sc = _joseph_split(starts, ends, i + 1, shape, lo, vox, idx[1 - b],
                                                w[1 - b], pv[1 - b], pw[1 - b], 0, n0)
        out[i] = _dot_split(image, idx[b], w[b], cur_pre, cur_n, pv[b], pw[b], cur_m, cur_sb,
                            cur_sc, pv[1 - b], m, sb, sc)


@numba.njit(nogil=True, cache=True, inline="always")
def _prefetch_run(image, pv, p, sb, sc, first, stop, whole):  # pragma: no cover - compiled
    """Prefetch the four neighbours of plane ``p`` of a run (those in ``[first, stop)``)."""
    v = pv[p]
    if whole or (v + sb + sc >= first and v < stop):
        _prefetch(image, v)
        _prefetch(image, v + sc)
        _prefetch(image, v + sb)
        _prefetch(image, v + sb + sc)


@numba.njit(nogil=True, cache=True, inline="always")
def _add_split(image, v, idx, w, n, pv, pw, m, sb, sc, first, stop, whole, pv2, m2, sb2,  # pragma: no cover
               sc2):
    """Add ``v`` times :func:`_joseph_split`'s weights into ``image`` (voxels ``first <= j <
    stop`` only, unless ``whole``). A line touches a voxel once: the order inside it is free.
    Prefetches the next line's run as :func:`_dot_split` does."""
    if whole:
        for k in range(n):
            image[np.uint64(idx[k])] += w[k] * v
        for p in range(m):
            if p < m2:
                _prefetch_run(image, pv2, p, sb2, sc2, first, stop, whole)
            j = np.uint64(pv[p])
            image[j] += pw[0, p] * v
            image[j + np.uint64(sc)] += pw[1, p] * v
            image[j + np.uint64(sb)] += pw[2, p] * v
            image[j + np.uint64(sb + sc)] += pw[3, p] * v
    else:
        for k in range(n):
            j = idx[k]
            if j >= first and j < stop:
                image[j] += w[k] * v
        for p in range(m):
            if p < m2:
                _prefetch_run(image, pv2, p, sb2, sc2, first, stop, whole)
            j = pv[p]
            if j >= first and j < stop:
                image[j] += pw[0, p] * v
            if j + sc >= first and j + sc < stop:
                image[j + sc] += pw[1, p] * v
            if j + sb >= first and j + sb < stop:
                image[j + sb] += pw[2, p] * v
            if j + sb + sc >= first and j + sb + sc < stop:
                image[j + sb + sc] += pw[3, p] * v
    for p in range(m, m2):
        _prefetch_run(image, pv2, p, sb2, sc2, first, stop, whole)


@numba.njit(nogil=True, cache=True, inline="always")
def _next_line(values, reach_first, reach_stop, i, first, stop, whole):  # pragma: no cover
    """The first line from ``i`` on with a nonzero value that reaches ``[first, stop)`` (all do
    when ``whole``); ``values.shape[0]`` if none."""
    n_lines = values.shape[0]
    while i < n_lines and (values[i] == 0.0 or not (
            whole or (reach_stop[i] > first and reach_first[i] < stop))):
        i += 1
    return i


@numba.njit(nogil=True, cache=True)
def _back_joseph(values, starts, ends, shape, lo, vox, image, first, stop, reach_first,  # pragma: no cover
                 reach_stop):
    """:func:`back` for Joseph through :func:`_joseph_split` (the same image, bit for bit),
    pipelined as :func:`_forward_joseph` is."""
    n_lines = starts.shape[0]
    bound = scratch_size_joseph(shape)
    planes = max(shape[0], shape[1], shape[2])
    idx = np.empty((2, bound), np.int64)
    w = np.empty((2, bound), np.float64)
    pv = np.empty((2, planes), np.int64)
    pw = np.empty((2, 4, planes), np.float64)
    whole = first == 0 and stop == image.shape[0]
    nxt = _next_line(values, reach_first, reach_stop, 0, first, stop, whole)
    if nxt == n_lines:
        return
    b = 0
    plane = shape[1] * shape[2]
    z_lo = first // plane  # the planes that hold [first, stop)
    z_hi = -(-stop // plane)
    _, n, m, sb, sc = _joseph_split(starts, ends, nxt, shape, lo, vox, idx[0], w[0], pv[0],
                                    pw[0], z_lo, z_hi)
    while nxt < n_lines:
        i = nxt
        cur_n, cur_m, cur_sb, cur_sc = n, m, sb, sc
        m = 0
        nxt = _next_line(values, reach_first, reach_stop, nxt + 1, first, stop, whole)
        if nxt < n_lines:  # traced without prefetching: _add_split prefetches its run
            _, n, m, sb, sc = _joseph_split(starts, ends, nxt, shape, lo, vox, idx[1 - b],
                                            w[1 - b], pv[1 - b], pw[1 - b], z_lo, z_hi)
        _add_split(image, values[i], idx[b], w[b], cur_n, pv[b], pw[b], cur_m, cur_sb, cur_sc,
                   first, stop, whole, pv[1 - b], m, sb, sc)
        b = 1 - b


@numba.njit(nogil=True, cache=True, inline="always")
def scratch_size_joseph(shape):  # pragma: no cover - compiled
    """:func:`scratch_size` of Joseph, in compiled code."""
    return 4 * max(shape[0], shape[1], shape[2])


@numba.njit(nogil=True, cache=True)
def _trace(method, starts, ends, i, shape, lo, vox, idx, w, image, pf_lo, pf_hi, z_lo,
           z_hi):  # pragma: no cover
    if method == SIDDON:
        return _siddon(starts, ends, i, shape, lo, vox, idx, w, image, pf_lo, pf_hi, z_lo, z_hi)
    return _joseph(starts, ends, i, shape, lo, vox, idx, w, image, pf_lo, pf_hi, z_lo, z_hi)


@numba.njit(nogil=True, cache=True, inline="always")
def _sums(image, idx, w, first, n, s0, s1, s2, s3):  # pragma: no cover - compiled
    """Add ``w[k] * image[idx[k]]`` for ``first <= k < n`` to four partial sums, the ``j``-th
    pair (``k = first + j``) to sum ``j % 4``; returns the four sums."""
    k = first
    while k + 4 <= n:
        s0 += w[k] * image[np.uint64(idx[k])]
        s1 += w[k + 1] * image[np.uint64(idx[k + 1])]
        s2 += w[k + 2] * image[np.uint64(idx[k + 2])]
        s3 += w[k + 3] * image[np.uint64(idx[k + 3])]
        k += 4
    if k < n:
        s0 += w[k] * image[np.uint64(idx[k])]
    if k + 1 < n:
        s1 += w[k + 1] * image[np.uint64(idx[k + 1])]
    if k + 2 < n:
        s2 += w[k + 2] * image[np.uint64(idx[k + 2])]
    return s0, s1, s2, s3


@numba.njit(nogil=True, cache=True, inline="always")
def _dot(image, idx, w, n):  # pragma: no cover - compiled
    """``sum_k w[k] * image[idx[k]]`` in four interleaved partial sums (pair ``k`` goes to sum
    ``k % 4``), added as ``(s0 + s1) + (s2 + s3)``: four independent chains keep more loads in
    flight than one. :func:`forward` and :func:`rows_forward` both sum this way (indices as
    unsigned: numba adds a negative-index wraparound to every signed one)."""
    s0, s1, s2, s3 = _sums(image, idx, w, 0, n, 0.0, 0.0, 0.0, 0.0)
    return (s0 + s1) + (s2 + s3)


@numba.njit(nogil=True, cache=True)
def forward(image, starts, ends, shape, lo, vox, method, bound, out):  # pragma: no cover
    """``out[i]`` = line integral of the flat ``image`` along line ``i``.

    A two-stage pipeline: line ``i + 1`` is traced before line ``i`` is gathered. Siddon's
    tracer prefetches the voxels as it finds them, so the image's cache lines load while it
    computes, and the gather, a short loop with no unpredictable branches, finds them in
    cache; Joseph's (:func:`_joseph_split`, a loop without branches) is too quick for that,
    and its voxels are prefetched while the line before is summed (:func:`_forward_joseph`).
    Sums run over :func:`trace_rows`' pairs in :func:`_dot`'s order, so stored rows give the
    same values bit for bit.
    """
    if method == JOSEPH:
        _forward_joseph(image, starts, ends, shape, lo, vox, out)
        return
    n_lines = starts.shape[0]
    idx = np.empty((2, bound), np.int64)
    w = np.empty((2, bound), np.float64)
    size = image.shape[0]
    if n_lines == 0:
        return
    n0 = shape[0]
    n_next = _trace(method, starts, ends, 0, shape, lo, vox, idx[0], w[0], image, 0, size, 0, n0)
    for i in range(n_lines):
        b = i & 1
        n = n_next
        if i + 1 < n_lines:
            n_next = _trace(method, starts, ends, i + 1, shape, lo, vox, idx[1 - b], w[1 - b],
                            image, 0, size, 0, n0)
        out[i] = _dot(image, idx[b], w[b], n)


@numba.njit(nogil=True, cache=True)
def back(values, starts, ends, shape, lo, vox, method, bound, image, first, stop, reach_first,
         reach_stop):  # pragma: no cover - compiled
    """Add ``values[i]`` times line ``i``'s weights into the flat ``image`` (the adjoint), for
    the voxels ``first <= j < stop`` only.

    Voxels get their terms in the order of the lines and of :func:`trace_rows`' pairs, so
    threads that own disjoint voxel ranges together write exactly what one call over all
    voxels writes. A line whose reach ``[reach_first[i], reach_stop[i])`` (flat indices, a
    superset of the voxels it touches: :func:`line_planes`) misses ``[first, stop)`` is not
    traced; over the whole image (``first == 0``, ``stop == image.size``) the reach arrays are
    not read and may be empty. Pipelined as :func:`forward` is (line ``i + 1`` is traced,
    prefetching the voxels in range, before line ``i`` is added).
    """
    if method == JOSEPH:
        _back_joseph(values, starts, ends, shape, lo, vox, image, first, stop, reach_first,
                     reach_stop)
        return
    n_lines = starts.shape[0]
    idx = np.empty((2, bound), np.int64)
    w = np.empty((2, bound), np.float64)
    whole = first == 0 and stop == image.shape[0]
    nxt = _next_line(values, reach_first, reach_stop, 0, first, stop, whole)
    if nxt == n_lines:
        return
    b = 0
    plane = shape[1] * shape[2]
    z_lo = first // plane  # the planes that hold [first, stop)
    z_hi = -(-stop // plane)
    n_next = _trace(method, starts, ends, nxt, shape, lo, vox, idx[0], w[0], image, first, stop,
                    z_lo, z_hi)
    while nxt < n_lines:
        i = nxt
        n = n_next
        nxt = _next_line(values, reach_first, reach_stop, nxt + 1, first, stop, whole)
        if nxt < n_lines:
            n_next = _trace(method, starts, ends, nxt, shape, lo, vox, idx[1 - b], w[1 - b],
                            image, first, stop, z_lo, z_hi)
        v = values[i]
        ib = idx[b]
        wb = w[b]
        if whole:
            for k in range(n):
                image[np.uint64(ib[k])] += wb[k] * v
        else:
            for k in range(n):
                j = ib[k]
                if j >= first and j < stop:
                    image[j] += wb[k] * v
        b = 1 - b


@numba.njit(nogil=True, cache=True)
def line_planes(starts, ends, shape, lo, vox, method, first, stop, work):  # pragma: no cover
    """Per line ``i``: planes ``first[i] <= p < stop[i]`` of axis 0 that hold every voxel the
    line can touch, and ``work[i]``, an estimate of the cost of tracing it.

    The range is conservative: the line is clipped to the grid's box grown by one voxel on
    every side, the axis-0 extent of that piece is widened by one plane on each side (Joseph
    interpolates between neighbouring planes; rounding moves nothing by a plane), then clipped
    to ``[0, shape[0]]``. A line that misses the grown box gets an empty range and no work.
    ``work`` is 1 plus the voxels crossed (Siddon) or the planes sampled (Joseph) in that piece.

    Examples
    --------
    >>> s, e = np.array([[-9.0, 0.5, 0.5], [9.0, 9, 9]]), np.array([[9.0, 0.5, 0.5], [9.0, 9, 9]])
    >>> first, stop, work = np.empty(2, np.int64), np.empty(2, np.int64), np.empty(2)
    >>> line_planes(s, e, np.array([4, 2, 2]), np.zeros(3), np.ones(3), SIDDON, first, stop, work)
    >>> first.tolist(), stop.tolist()
    ([0, 0], [4, 0])
    """
    n0 = shape[0]
    box_lo = lo - vox
    box_hi = lo + (shape + 1) * vox
    inv_vox = 1.0 / vox
    for i in range(starts.shape[0]):
        tmin = 0.0
        tmax = 1.0
        hit = True
        for a in range(3):
            p = starts[i, a]
            d = ends[i, a] - p
            if d == 0.0:
                if p < box_lo[a] or p > box_hi[a]:
                    hit = False
            else:
                inv = 1.0 / d
                t0 = (box_lo[a] - p) * inv
                t1 = (box_hi[a] - p) * inv
                if t0 > t1:
                    t0, t1 = t1, t0
                tmin = max(tmin, t0)
                tmax = min(tmax, t1)
        if not hit or tmin > tmax:
            first[i] = 0
            stop[i] = 0
            work[i] = 0.0
            continue
        p = starts[i, 0]
        d = ends[i, 0] - p
        za = p + tmin * d
        zb = p + tmax * d
        ua = (min(za, zb) - lo[0]) * inv_vox[0]
        ub = (max(za, zb) - lo[0]) * inv_vox[0]
        ua = min(max(ua, -4.0), n0 + 4.0)  # finite ints below
        ub = min(max(ub, -4.0), n0 + 4.0)
        f = min(max(int(math.floor(ua)) - 1, 0), n0)  # noqa: RUF046 (numba typing)
        s = min(max(int(math.floor(ub)) + 2, 0), n0)  # noqa: RUF046
        first[i] = f
        stop[i] = max(s, f)
        steps = 0.0
        for a in range(3):
            u = abs(ends[i, a] - starts[i, a]) * inv_vox[a]
            steps = steps + u if method == SIDDON else max(steps, u)
        work[i] = 1.0 + steps * (tmax - tmin)


#: :func:`line_order`'s bins: axial slabs of this many voxels, and transaxial directions
ORDER_SLAB = 4
ORDER_DIRECTIONS = 128


@numba.njit(nogil=True, cache=True)
def line_order(starts, ends, lo, vox, n_slabs):  # pragma: no cover - compiled
    """A permutation of the lines that puts lines through nearby voxels next to each other.

    Lines are binned by the axial slab of ``ORDER_SLAB`` voxels that holds their midpoint,
    then by transaxial direction (``ORDER_DIRECTIONS`` bins of a pseudo-angle in ``[0, pi)``),
    and kept in input order inside a bin (a counting sort: stable, and the same permutation
    for the same lines). Consecutive lines then share many of their voxels' cache lines.

    Examples
    --------
    >>> starts = np.array([[9.0, 0, -5], [0.0, -5, 0], [0.0, 0, -5]])
    >>> ends = np.array([[9.0, 0, 5], [0.0, 5, 0], [0.0, 0, 5]])
    >>> line_order(starts, ends, np.zeros(3), np.ones(3), 3)  # slab 2 last; x before y
    array([2, 1, 0])
    """
    n = starts.shape[0]
    bins = n_slabs * ORDER_DIRECTIONS
    key = np.empty(n, np.int64)
    count = np.zeros(bins + 1, np.int64)
    width = ORDER_SLAB * vox[0]
    for i in range(n):
        z = 0.5 * (starts[i, 0] + ends[i, 0])
        slab = int(math.floor((z - lo[0]) / width)) if math.isfinite(z) else 0  # noqa: RUF046
        slab = min(max(slab, 0), n_slabs - 1)
        dy = ends[i, 1] - starts[i, 1]
        dx = ends[i, 2] - starts[i, 2]
        if dx < 0.0 or (dx == 0.0 and dy < 0.0):
            dx = -dx
            dy = -dy
        norm = abs(dx) + abs(dy)
        pseudo = dy / norm if norm > 0.0 else 0.0  # in [-1, 1], increasing with the angle
        d = int((pseudo + 1.0) * (0.5 * ORDER_DIRECTIONS))
        d = min(max(d, 0), ORDER_DIRECTIONS - 1)
        key[i] = slab * ORDER_DIRECTIONS + d
        count[key[i] + 1] += 1
    for b in range(bins):
        count[b + 1] += count[b]
    order = np.empty(n, np.int64)
    for i in range(n):
        order[count[key[i]]] = i
        count[key[i]] += 1
    return order


@numba.njit(nogil=True, cache=True)
def trace_rows(starts, ends, first, shape, lo, vox, method, bound, indptr, indices, weights):
    """Write the rows of lines ``first, first + 1, ...`` as CSR until ``indices`` is full.

    ``indptr[0]`` must be 0; row ``j`` (line ``first + j``) is
    ``indices[indptr[j]:indptr[j + 1]]``. Returns the number of rows written.
    """  # pragma: no cover
    idx = np.empty(bound, np.int64)
    w = np.empty(bound, np.float64)
    cap = indices.shape[0]
    rows = 0
    for i in range(first, starts.shape[0]):
        n = _trace(method, starts, ends, i, shape, lo, vox, idx, w, weights, 0, 0, 0, shape[0])
        pos = indptr[rows]
        if pos + n > cap:
            break
        for k in range(n):
            indices[pos + k] = idx[k]
            weights[pos + k] = w[k]
        rows += 1
        indptr[rows] = pos + n
    return rows


@numba.njit(nogil=True, cache=True)
def rows_forward(image, indptr, indices, weights, out):  # pragma: no cover
    """``out[j]`` = row ``j`` times the flat ``image``, summed as :func:`forward` sums."""
    for j in range(indptr.shape[0] - 1):
        a = indptr[j]
        n = indptr[j + 1] - a
        out[j] = _dot(image, indices[a:], weights[a:], n)


@numba.njit(nogil=True, cache=True)
def rows_back(values, indptr, indices, weights, image):  # pragma: no cover
    """Add ``values[j]`` times row ``j`` into the flat ``image``."""
    for j in range(indptr.shape[0] - 1):
        v = values[j]
        for k in range(indptr[j], indptr[j + 1]):
            image[indices[k]] += weights[k] * v


#: how many entries ahead the EM kernels prefetch the image (a row's voxels are scattered over
#: the image: with the loads of the next ~48 entries in flight the misses overlap)
EM_PREFETCH = 48


@numba.njit(nogil=True, cache=True, inline="always")
def _em_ratio(f, indptr, indices, weights, j, last):  # pragma: no cover - compiled
    """Row ``j``'s ``A_j f`` (summed in entry order), prefetching ``f`` :data:`EM_PREFETCH`
    entries ahead (not beyond entry ``last``)."""
    s = 0.0
    for k in range(indptr[j], indptr[j + 1]):
        _prefetch(f, np.int64(indices[min(k + EM_PREFETCH, last)]))
        s += weights[k] * f[indices[k]]
    return s


@numba.njit(nogil=True, cache=True)
def em_rows(f, indptr, indices, weights, first, stop, c):  # pragma: no cover
    """The EM step of rows ``first .. stop - 1``: ``c += sum_j A_j^T (1 / (A_j f))`` over
    ``A_j f > 0``, each row's scatter right after its sum (it finds the lines the sum loaded when
    ``f`` and ``c`` are interleaved).

    Returns the number of rows whose projection was positive.
    """
    used = 0
    last = max(indptr[stop] - 1, indptr[first])
    for j in range(first, stop):
        s = _em_ratio(f, indptr, indices, weights, j, last)
        if s > 0.0:
            r = 1.0 / s
            for k in range(indptr[j], indptr[j + 1]):
                c[indices[k]] += weights[k] * r
            used += 1
    return used


@numba.njit(nogil=True, cache=True)
def em_count(indptr, indices, first, stop, shift, counts):  # pragma: no cover - compiled
    """Add to ``counts[b]`` the entries of rows ``first .. stop - 1`` in voxel block ``b``
    (voxels ``b << shift .. (b + 1) << shift``)."""
    # a row's entries come in runs in one block: count a run in a register, not in memory
    k = indptr[first]
    end = indptr[stop]
    while k < end:
        b = indices[k] >> shift
        run = k
        k += 1
        while k < end and indices[k] >> shift == b:
            k += 1
        counts[b] += k - run


@numba.njit(nogil=True, cache=True)
def em_log(f, indptr, indices, weights, first, stop, shift, pos, log_idx,  # pragma: no cover
           log_val):
    """:func:`em_rows` for rows ``first .. stop - 1`` that writes its terms instead of adding
    them: term ``(i, weights[k] * (1 / (A_j f)))`` goes to ``log_idx[pos[b]]``,
    ``log_val[pos[b]]`` of voxel ``i``'s block ``b = i >> shift`` (``pos[b]`` then moves on),
    in row order. :func:`em_apply` adds them later: ``c[i] += value``, the same sums as
    :func:`em_rows`'s. Returns the number of positive rows."""
    used = 0
    last = max(indptr[stop] - 1, indptr[first])
    for j in range(first, stop):
        s = _em_ratio(f, indptr, indices, weights, j, last)
        if s > 0.0:
            r = 1.0 / s
            k = indptr[j]
            end = indptr[j + 1]
            while k < end:  # a run of entries in one block, its position in a register
                b = indices[k] >> shift
                p = pos[b]
                while True:
                    log_idx[p] = indices[k]
                    log_val[p] = weights[k] * r
                    p += 1
                    k += 1
                    if k == end or indices[k] >> shift != b:
                        break
                pos[b] = p
            used += 1
    return used


@numba.njit(nogil=True, cache=True)
def em_apply(log_idx, log_val, starts, stops, b_first, b_stop, c):  # pragma: no cover
    """Add the logged terms of the voxel blocks ``b_first .. b_stop - 1`` into ``c``: block by
    block (its part of ``c`` stays in cache), and in a block the logs ``t = 0, 1, ...`` in turn,
    log ``t``'s terms ``starts[t, b] .. stops[t, b] - 1`` in the order :func:`em_log` wrote
    them (prefetching ``c`` :data:`EM_PREFETCH` terms ahead)."""
    for b in range(b_first, b_stop):
        for t in range(starts.shape[0]):
            last = stops[t, b] - 1
            for p in range(starts[t, b], stops[t, b]):
                # few terms per cache line when the logs are short: prefetch as em_rows does
                _prefetch(c, np.int64(log_idx[min(p + EM_PREFETCH, last)]))
                c[log_idx[p]] += log_val[p]


@numba.njit(nogil=True, cache=True)
def em_image_update(f, c, inv_a, scale, first, stop, zero):  # pragma: no cover - compiled
    """OSEM's update of voxels ``first .. stop - 1``: ``f = ((f * c) * inv_a) * scale`` (each
    product rounded to ``f``'s dtype, as NumPy's three in-place multiplications round), and
    ``zero[i] = 0`` (the next subset's sum)."""
    for i in range(first, stop):
        f[i] = f[i] * c[i] * inv_a[i] * scale
        zero[i] = 0
