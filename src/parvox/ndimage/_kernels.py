"""Compiled 1-D line kernels with scipy's arithmetic: correlation and the running box sum.

``scipy.ndimage`` filters a line by copying it into a buffer of doubles extended by the
boundary mode (``NI_ExtendLine``), computing every output in double precision, and casting it
to the output dtype. These kernels do the same arithmetic in the same order per output element
(so the results are equal bit for bit), but run over many lines at once:

- along an axis that is not the last one (:func:`correlate_rows`, :func:`uniform_rows`), the
  innermost loop runs over the contiguous trailing axis, i.e. over independent lines, and
  vectorises (SIMD over lines);
- along the last axis (:func:`correlate_lines`, :func:`uniform_lines`) each line is extended
  into a double buffer like scipy's, and the taps loop outside a loop over the outputs.

Arrays are 3-D ``(pre, n, post)`` (rows) or 2-D ``(lines, n)`` views: ``src`` is C-contiguous
(numba then knows its rows are, and vectorises), ``dst`` is the output region. ``table[e]`` is the
source index along the axis of extended position ``e`` (output ``j`` reads ``e = j .. j +
size - 1``), or ``-1`` where the value is ``cval``. ``sym`` is scipy's symmetry flag of the
weights (1 symmetric, -1 antisymmetric, 0 neither). No fast-math: every addition and
multiplication is rounded as in scipy's C loop, and ``x / size`` stays a division.

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> a = np.arange(12.0).reshape(3, 4)
>>> w = np.array([0.25, 0.5, 0.25])
>>> table = np.array([0, 0, 1, 2, 2])                    # "nearest" along axis 0
>>> out = np.empty_like(a)
>>> correlate_rows(a.reshape(1, 3, 4), out.reshape(1, 3, 4), w, table, 1, 0.0)
>>> bool(np.array_equal(out, ndi.correlate1d(a, w, axis=0, mode="nearest")))
True
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "correlate_lines", "correlate_rows", "correlate_rows_lines", "uniform_lines", "uniform_rows",
]

_jit = numba.njit(nogil=True, cache=True)

#: outputs of a line computed together (their taps and sums stay in the L1 cache)
_RUN = 512
#: rows of the intermediate band of :func:`correlate_rows_lines` (it stays in the L2 cache)
BAND = 16


@_jit
def _all_inside(table: np.ndarray, start: int, size: int) -> bool:
    for e in range(start, start + size):
        if table[e] < 0:
            return False
    return True


@_jit
def _straight(table: np.ndarray) -> tuple[int, int]:
    """The longest run ``lo .. hi - 1`` of ``table`` whose entries are consecutive sources."""
    best_lo = best_hi = 0
    e = 0
    n = table.size
    while e < n:
        if table[e] < 0:
            e += 1
            continue
        f = e + 1
        while f < n and table[f] == table[f - 1] + 1:
            f += 1
        if f - e > best_hi - best_lo:
            best_lo, best_hi = e, f
        e = f
    return best_lo, best_hi


@_jit
def _extend(ext: np.ndarray, line: np.ndarray, table: np.ndarray, lo: int, hi: int, start: int,
            cval: float) -> None:
    """``ext[e]`` = the double of ``line[table[e]]`` (``cval`` where it is -1); positions
    ``lo .. hi - 1`` read ``line[start ..]`` in order (:func:`_straight`): a plain copy."""
    for e in range(lo):
        t = table[e]
        ext[e] = cval if t < 0 else np.float64(line[t])
    inside = ext[lo:hi]
    part = line[start : start + hi - lo]
    for e in range(hi - lo):
        inside[e] = part[e]
    for e in range(hi, ext.size):
        t = table[e]
        ext[e] = cval if t < 0 else np.float64(line[t])


@_jit
def _sum_taps(
    acc: np.ndarray, n: int, buf: np.ndarray, off: np.ndarray, w: np.ndarray, sym: int
) -> None:
    """``acc[k]`` = scipy's sum for a run of ``n`` outputs; tap ``t`` reads ``buf[off[t] + k]``.

    Four taps are added per sweep over ``acc`` (in scipy's order, so the same bits), which
    loads and stores each sum once per four taps. Along a non-last axis ``buf`` is a plane of
    rows (``off[t]`` the start of tap ``t``'s row), along the last axis a line's extension.
    """
    size = w.size
    s1 = size // 2
    s2 = size - s1 - 1
    if sym != 0:
        c = buf[off[s1] : off[s1] + n]
        w0 = w[s1]
        for k in range(n):
            acc[k] = np.float64(c[k]) * w0
        jj = -s1
        while jj + 4 <= 0:
            a1 = buf[off[s1 + jj] : off[s1 + jj] + n]
            b1 = buf[off[s1 - jj] : off[s1 - jj] + n]
            a2 = buf[off[s1 + jj + 1] : off[s1 + jj + 1] + n]
            b2 = buf[off[s1 - jj - 1] : off[s1 - jj - 1] + n]
            a3 = buf[off[s1 + jj + 2] : off[s1 + jj + 2] + n]
            b3 = buf[off[s1 - jj - 2] : off[s1 - jj - 2] + n]
            a4 = buf[off[s1 + jj + 3] : off[s1 + jj + 3] + n]
            b4 = buf[off[s1 - jj - 3] : off[s1 - jj - 3] + n]
            w1 = w[s1 + jj]
            w2 = w[s1 + jj + 1]
            w3 = w[s1 + jj + 2]
            w4 = w[s1 + jj + 3]
            if sym > 0:
                for k in range(n):
                    t = acc[k] + (np.float64(a1[k]) + np.float64(b1[k])) * w1
                    t = t + (np.float64(a2[k]) + np.float64(b2[k])) * w2
                    t = t + (np.float64(a3[k]) + np.float64(b3[k])) * w3
                    acc[k] = t + (np.float64(a4[k]) + np.float64(b4[k])) * w4
            else:
                for k in range(n):
                    t = acc[k] + (np.float64(a1[k]) - np.float64(b1[k])) * w1
                    t = t + (np.float64(a2[k]) - np.float64(b2[k])) * w2
                    t = t + (np.float64(a3[k]) - np.float64(b3[k])) * w3
                    acc[k] = t + (np.float64(a4[k]) - np.float64(b4[k])) * w4
            jj += 4
        while jj < 0:
            a1 = buf[off[s1 + jj] : off[s1 + jj] + n]
            b1 = buf[off[s1 - jj] : off[s1 - jj] + n]
            w1 = w[s1 + jj]
            if sym > 0:
                for k in range(n):
                    acc[k] += (np.float64(a1[k]) + np.float64(b1[k])) * w1
            else:
                for k in range(n):
                    acc[k] += (np.float64(a1[k]) - np.float64(b1[k])) * w1
            jj += 1
        return
    c = buf[off[s1 + s2] : off[s1 + s2] + n]
    w0 = w[s1 + s2]
    for k in range(n):
        acc[k] = np.float64(c[k]) * w0
    t0 = 0
    while t0 + 4 <= size - 1:
        a1 = buf[off[t0] : off[t0] + n]
        a2 = buf[off[t0 + 1] : off[t0 + 1] + n]
        a3 = buf[off[t0 + 2] : off[t0 + 2] + n]
        a4 = buf[off[t0 + 3] : off[t0 + 3] + n]
        w1 = w[t0]
        w2 = w[t0 + 1]
        w3 = w[t0 + 2]
        w4 = w[t0 + 3]
        for k in range(n):
            t = acc[k] + np.float64(a1[k]) * w1
            t = t + np.float64(a2[k]) * w2
            t = t + np.float64(a3[k]) * w3
            acc[k] = t + np.float64(a4[k]) * w4
        t0 += 4
    while t0 < size - 1:
        a1 = buf[off[t0] : off[t0] + n]
        w1 = w[t0]
        for k in range(n):
            acc[k] += np.float64(a1[k]) * w1
        t0 += 1



@_jit
def correlate_rows(
    src: np.ndarray, dst: np.ndarray, w: np.ndarray,
    table: np.ndarray, sym: int, cval: float,
) -> None:
    """Correlate along axis 1 of ``(pre, n, post)`` arrays (scipy's ``NI_Correlate1D``)."""
    pre, n_out, post = dst.shape
    size = w.size
    acc = np.empty(post, np.float64)
    off = np.empty(size, np.int64)
    for i in range(pre):
        plane = src[i]
        flat = plane.reshape(plane.shape[0] * post)
        for j in range(n_out):
            out = dst[i, j]
            if _all_inside(table, j, size):
                for t in range(size):
                    off[t] = table[j + t] * post
                _sum_taps(acc, post, flat, off, w, sym)
            else:  # some taps read cval: the same sums, value by value
                for k in range(post):
                    acc[k] = _tap_sum(plane, table, j, k, w, sym, cval)
            for k in range(post):
                out[k] = acc[k]


@_jit
def _value(plane: np.ndarray, table: np.ndarray, e: int, k: int, cval: float) -> float:
    t = table[e]
    return cval if t < 0 else np.float64(plane[t, k])


@_jit
def _tap_sum(
    plane: np.ndarray, table: np.ndarray, j: int, k: int, w: np.ndarray, sym: int, cval: float
) -> float:
    size = w.size
    s1 = size // 2
    s2 = size - s1 - 1
    if sym != 0:
        acc = _value(plane, table, j + s1, k, cval) * w[s1]
        for jj in range(-s1, 0):
            a = _value(plane, table, j + s1 + jj, k, cval)
            b = _value(plane, table, j + s1 - jj, k, cval)
            acc += ((a + b) if sym > 0 else (a - b)) * w[s1 + jj]
        return acc
    acc = _value(plane, table, j + s1 + s2, k, cval) * w[s1 + s2]
    for jj in range(-s1, s2):
        acc += _value(plane, table, j + s1 + jj, k, cval) * w[s1 + jj]
    return acc


@_jit
def correlate_lines(
    src: np.ndarray, dst: np.ndarray, w: np.ndarray, table: np.ndarray,
    sym: int, cval: float,
) -> None:
    """Correlate along the last axis of ``(lines, n)`` arrays (scipy's ``NI_Correlate1D``)."""
    lines, n_out = dst.shape
    size = w.size
    ext = np.empty(n_out + size - 1, np.float64)
    acc = np.empty(min(_RUN, n_out), np.float64)
    off = np.empty(size, np.int64)
    # the positions whose sources are consecutive (the inside of the line) are a plain copy
    lo, hi = _straight(table)
    start = table[lo] if hi > lo else 0
    for i in range(lines):
        line = src[i]
        _extend(ext, line, table, lo, hi, start, cval)
        out = dst[i]
        for j0 in range(0, n_out, _RUN):  # runs of outputs whose taps stay in L1
            m = min(_RUN, n_out - j0)
            for t in range(size):
                off[t] = j0 + t
            _sum_taps(acc, m, ext, off, w, sym)
            o = out[j0 : j0 + m]
            for j in range(m):
                o[j] = acc[j]


@_jit
def correlate_rows_lines(
    src: np.ndarray, dst: np.ndarray, tmp: np.ndarray, first: int, stop: int,
    w1: np.ndarray, table1: np.ndarray, sym1: int, cval1: float,
    w2: np.ndarray, table2: np.ndarray, sym2: int, cval2: float,
) -> None:
    """:func:`correlate_rows` then :func:`correlate_lines`, fused over bands of rows.

    ``src`` is ``(pre, n, post)``, ``dst`` the ``(pre, n_out, m)`` region of the second pass's
    result. Bands of :data:`BAND` output rows (``tmp`` holds one, ``(BAND, post)`` of the
    intermediate dtype: scipy rounds the first pass's result to it) are filtered along axis 1
    into ``tmp``, then along the last axis into ``dst``, while the band is still in the L2
    cache: the intermediate never goes to memory. Bands are numbered plane by plane; this call
    does bands ``first .. stop - 1`` (the parts of a thread team).
    """
    n_out = dst.shape[1]
    post = src.shape[2]
    size1 = w1.size
    per = (n_out + BAND - 1) // BAND
    for k in range(first, stop):
        i = k // per
        j0 = (k % per) * BAND
        nb = min(BAND, n_out - j0)
        band = tmp[:nb]
        correlate_rows(src[i : i + 1], band.reshape(1, nb, post), w1,
                       table1[j0 : j0 + nb + size1 - 1], sym1, cval1)
        correlate_lines(band, dst[i, j0 : j0 + nb], w2, table2, sym2, cval2)


@_jit
def uniform_rows(
    src: np.ndarray, dst: np.ndarray, size: int, table: np.ndarray,
    cval: float, state: np.ndarray, fresh: bool,
) -> None:
    """Box filter along axis 1 of ``(pre, n, post)`` arrays (scipy's ``NI_UniformFilter1D``).

    scipy keeps a running window sum: ``x[j + size] - x[j]`` is added per step and each output
    is that sum divided by ``size``. ``table`` has one entry more than the correlation's, in
    front, so output ``j`` adds ``x[e = j + size] - x[e = j]``. With ``fresh`` the line starts
    here (scipy's first window sum)
    otherwise ``state[i, k]`` holds the running sum of the
    position before the first output. On return ``state`` holds that of the last one.
    """
    pre, n_out, post = dst.shape
    d = np.float64(size)
    tmp = np.empty(post, np.float64)
    for i in range(pre):
        plane = src[i]
        first = 0
        if fresh:
            for k in range(post):
                tmp[k] = 0.0
            for e in range(1, size + 1):
                for k in range(post):
                    tmp[k] += _value(plane, table, e, k, cval)
            out = dst[i, 0]
            for k in range(post):
                out[k] = tmp[k] / d
            first = 1
        else:
            for k in range(post):
                tmp[k] = state[i, k]
        for j in range(first, n_out):
            ta, tb = table[j + size], table[j]
            out = dst[i, j]
            if ta >= 0 and tb >= 0:
                ra, rb = plane[ta], plane[tb]
                for k in range(post):
                    tmp[k] += np.float64(ra[k]) - np.float64(rb[k])
            else:
                for k in range(post):
                    tmp[k] += _value(plane, table, j + size, k, cval) - _value(
                        plane, table, j, k, cval
                    )
            for k in range(post):
                out[k] = tmp[k] / d
        for k in range(post):
            state[i, k] = tmp[k]


@_jit
def uniform_lines(
    src: np.ndarray, dst: np.ndarray, size: int, table: np.ndarray, cval: float,
    state: np.ndarray, fresh: bool,
) -> None:
    """Box filter along the last axis of ``(lines, n)`` arrays; see :func:`uniform_rows`."""
    lines, n_out = dst.shape
    d = np.float64(size)
    ext = np.empty(n_out + size, np.float64)
    # the positions whose sources are consecutive (the inside of the line) are a plain copy
    lo, hi = _straight(table)
    start = table[lo] if hi > lo else 0
    for i in range(lines):
        line = src[i]
        _extend(ext, line, table, lo, hi, start, cval)
        out = dst[i]
        first = 0
        if fresh:
            tmp = 0.0
            for e in range(1, size + 1):
                tmp += ext[e]
            out[0] = tmp / d
            first = 1
        else:
            tmp = state[i, 0]
        for j in range(first, n_out):
            tmp += ext[j + size] - ext[j]
            out[j] = tmp / d
        state[i, 0] = tmp
