"""Every ``parvox.ndimage`` function at 5, 8, 13 and 16 ranks equals ``scipy.ndimage``.

Each function runs on a small odd 3-D volume in every layout of :mod:`tests.scale._layouts`
(one block per rank, fewer planes than ranks along axis 0, more blocks than ranks, 1-plane
blocks, whose halos are wider than the blocks), and its gathered result equals scipy's on the
whole volume. One test per family of functions; all of them share one launch per rank count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.testing import mpi_tests
from tests.scale._layouts import SCALE_RANKS, check, layouts

SHAPE = (3, 9, 7)
_W3 = np.random.default_rng(1).random((3, 3, 3))
_CROSS = ndi.generate_binary_structure(3, 1)


def _line_sum(line: np.ndarray, out: np.ndarray) -> None:
    out[...] = line[:-2] + 2 * line[1:-1] - line[2:]


#: family -> [(function, positional args after the input, keywords, input kind)]
#: input kinds: "f" float volume, "b" boolean volume, "i" integer volume
FAMILIES: dict[str, list[tuple[str, tuple[Any, ...], dict[str, Any], str]]] = {
    "filters": [
        ("correlate", (_W3,), {}, "f"),
        ("convolve", (_W3,), {"mode": "wrap"}, "f"),
        ("correlate1d", ([1.0, -2.0, 0.5, 3.0],), {"axis": 0}, "f"),
        ("convolve1d", ([1.0, 2.0, -1.0],), {"axis": 2, "mode": "nearest"}, "f"),
        ("gaussian_filter", (1.0,), {}, "f"),  # radius 4: wider than 1-plane blocks
        ("gaussian_filter1d", (1.5,), {"axis": 0, "order": 1}, "f"),
        ("uniform_filter", (3,), {"mode": "constant", "cval": 0.5}, "f"),
        ("uniform_filter1d", (4,), {"axis": 1}, "f"),
    ],
    "rank_filters": [
        ("maximum_filter", (), {"size": 3}, "f"),
        ("minimum_filter", (), {"footprint": _CROSS, "mode": "mirror"}, "f"),
        ("maximum_filter1d", (3,), {"axis": 0}, "f"),
        ("minimum_filter1d", (5,), {"axis": 2}, "f"),
        ("median_filter", (), {"size": 3}, "f"),
        ("percentile_filter", (30,), {"size": (3, 1, 5)}, "f"),
        ("rank_filter", (2,), {"size": (3, 3, 1)}, "i"),
        ("generic_filter", (np.ptp,), {"size": (2, 2, 3)}, "f"),
        ("generic_filter1d", (_line_sum, 3), {"axis": 0}, "f"),
    ],
    "derivatives": [
        ("sobel", (), {"axis": 0}, "f"),
        ("prewitt", (), {"axis": 2}, "f"),
        ("laplace", (), {}, "f"),
        ("gaussian_laplace", (0.8,), {}, "f"),
        ("gaussian_gradient_magnitude", (1.0,), {}, "f"),
    ],
    "morphology": [
        ("binary_erosion", (), {}, "b"),
        ("binary_dilation", (), {"iterations": 2}, "b"),
        ("binary_opening", (), {"structure": _CROSS}, "b"),
        ("binary_closing", (), {}, "b"),
        ("binary_fill_holes", (), {}, "b"),
        ("grey_erosion", (), {"size": (3, 3, 3)}, "i"),
        ("grey_dilation", (), {"footprint": _CROSS}, "i"),
    ],
    "distance": [
        ("distance_transform_edt", (), {}, "b"),
        ("distance_transform_edt", (), {"sampling": (2.0, 1.0, 0.5), "return_indices": True},
         "b"),
    ],
}


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "f": rng.standard_normal(SHAPE),
        "b": rng.random(SHAPE) > 0.35,
        "i": rng.integers(0, 50, SHAPE).astype(np.int16),
    }


def _gathered(result: Any) -> Any:
    from parvox.distarray import DistArray

    if isinstance(result, tuple):
        return tuple(_gathered(r) for r in result)
    return result.allgather() if isinstance(result, DistArray) else result


def run_family(family: str, only: Sequence[str] | None = None, first: int | None = None) -> None:
    """Every function of ``family`` in every layout (``only``: these layout names; ``first``:
    the first functions of the family only)."""
    from mpi4py import MPI

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    size = MPI.COMM_WORLD.Get_size()
    arrays = _inputs()
    for lname, layout in layouts(SHAPE, size).items():
        if only is not None and lname not in only:
            continue
        dist = {k: DistArray.from_global(a, **layout) for k, a in arrays.items()}
        for name, args, kw, kind in FAMILIES[family][:first]:
            want = getattr(ndi, name)(arrays[kind], *args, **kw)
            got = _gathered(getattr(pnd, name)(dist[kind], *args, **kw))
            case = f"{name}{kw} on {lname} at {size} ranks"
            if isinstance(want, tuple):
                for g, w in zip(got, want, strict=True):
                    check(g, w, case)
            else:
                check(got, want, case)
                assert np.asarray(got).dtype == want.dtype, case


def run_measurements(only: Sequence[str] | None = None) -> None:
    """label and every measurement (per label and whole-array), rescale, find_objects."""
    from mpi4py import MPI

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    size = MPI.COMM_WORLD.Get_size()
    arrays = _inputs()
    values = arrays["f"]
    lab, n = ndi.label(arrays["b"])
    index = list(range(n + 2))  # label 0 and one label no element has
    reductions: list[tuple[str, Callable[..., Any]]] = [
        (name, getattr(ndi, name)) for name in
        ("sum", "sum_labels", "mean", "variance", "minimum", "maximum", "center_of_mass")
    ]
    for lname, layout in layouts(SHAPE, size).items():
        if only is not None and lname not in only:
            continue
        np.seterr(invalid="ignore")  # scipy's mean of the empty label: NaN, as parvox's
        case = f"on {lname} at {size} ranks"
        x = DistArray.from_global(values, **layout)
        got_lab, got_n = pnd.label(DistArray.from_global(arrays["b"], **layout))
        assert got_n == n, f"label count {got_n} != {n} {case}"
        check(got_lab.allgather(), lab, f"label {case}")
        for name, ref in reductions:
            for idx in (None, index):
                want = ref(values, lab, idx) if idx is not None else ref(values)
                got = getattr(pnd, name)(x, got_lab if idx is not None else None, idx)
                check(np.asarray(got, dtype=float), np.asarray(want, dtype=float),
                      f"{name} index={idx} {case}")
        check(np.stack(pnd.histogram(x, -2.0, 2.0, 5, got_lab, index[1:4])),
              np.stack(ndi.histogram(values, -2.0, 2.0, 5, lab, index[1:4])),
              f"histogram {case}")
        check(pnd.labeled_comprehension(x, got_lab, index, np.median, float, -1.0),
              ndi.labeled_comprehension(values, lab, index, np.median, float, -1.0),
              f"labeled_comprehension {case}")
        assert pnd.find_objects(got_lab) == ndi.find_objects(lab), f"find_objects {case}"
        span = values.max() - values.min()
        check(pnd.rescale(x).allgather(), (values - values.min()) / span, f"rescale {case}")


mpi_tests(
    globals(),
    {f"ndimage_{family}": (lambda f=family: run_family(f)) for family in FAMILIES}
    | {"ndimage_label_and_measurements": run_measurements},
    ranks=SCALE_RANKS,
    timeout=300,
    marks=[pytest.mark.scale],
)
