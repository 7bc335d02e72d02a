"""Benchmark: the slice kernel writing a message rounded to uint8 against writing it in float32.

The server's zoom-1 PNG/JPEG slices of an integer volume travel rounded to the volume's dtype,
the kernel writing the rounded values straight into the message
(``PartExtractor(rounded=True)``); the engine's raw slices travel in float32. This times both
messages of the same slices, in one process: ``bench/slicing.py``'s warm planes (512x512,
orthogonal to the main diagonal, one voxel apart around its middle) of an RGB phantom stored
with the default extents, every extent in the reader's cache (one untimed pass first), each
slice's message written by :meth:`parvox.slicing.SliceSource.message_of` as the server's
extract stage writes it. The two kinds alternate plane by plane over ``--repeats`` passes;
each figure is the median slice. Both messages are checked against each other: the rounded
values equal :func:`~parvox.slicing.finish_slice` of the float32 ones.

The last line is ``ratio: rounded/float32 message = X``.

Usage::

    python bench/rounding.py                   # 320x416x672 phantom (bench/slicing.py --quick's)
    python bench/rounding.py --shape 64 80 96 --nplanes 4 --repeats 2
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from slicing import SIZE, browse_planes, volume_shape


def measure(store: str | Path, nplanes: int, repeats: int) -> dict[str, Any]:
    """Median ms per slice of the float32 and the rounded message of ``nplanes`` warm planes
    (``repeats`` passes, alternating), and the bytes of each message."""
    from mpi4py import MPI

    from parvox.slicing import SliceSource, finish_slice, new_rows, place_message

    with SliceSource(store, comm=MPI.COMM_SELF, cache_bytes=1 << 31) as src:
        planes = [src.level_plane(p, 0) for p in browse_planes(src.meta.shape, nplanes, 1)]
        work = [(p, *src.extents_by_rank(p)[0]) for p in planes]
        c, dt = src.channels, src.meta.dtype

        def message(plane: Any, keys: np.ndarray, ranges: np.ndarray, rounded: bool) -> Any:
            blocks, cached = src.fetch(keys)  # (the server's read stage: cached by address)
            return src.message_of(plane, blocks, keys, ranges, cached=cached, rounded=rounded)

        sizes = {}
        for plane, keys, ranges in work:  # warm, and the two messages checked
            raw, rows = new_rows(plane, c), new_rows(plane, c, dt)
            small, big = message(plane, keys, ranges, True), message(plane, keys, ranges, False)
            place_message(big, raw, c)
            place_message(small, rows, c)
            if not np.array_equal(rows, finish_slice(raw, dt)):
                raise SystemExit("the rounded message differs from the float32 one rounded")
            sizes = {"rounded": small.nbytes, "float32": big.nbytes}
        times: dict[str, list[float]] = {"float32": [], "rounded": []}
        for _ in range(repeats):
            for plane, keys, ranges in work:
                for kind in ("float32", "rounded"):
                    t0 = time.perf_counter()
                    message(plane, keys, ranges, kind == "rounded")
                    times[kind].append(time.perf_counter() - t0)
    return {kind: 1e3 * float(np.median(t)) for kind, t in times.items()} | {
        f"{kind}_kb": n / 1e3 for kind, n in sizes.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=volume_shape(quick=True),
                        help="the phantom's shape (default bench/slicing.py --quick's)")
    parser.add_argument("--nplanes", type=int, default=48, help="warm planes (default 48)")
    parser.add_argument("--repeats", type=int, default=5, help="passes (default 5)")
    parser.add_argument("--workdir", default=None,
                        help="where the store is built (default: a temporary directory)")
    args = parser.parse_args(argv)
    for name in ("nplanes", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"argument --{name}: must be >= 1, got {getattr(args, name)}")
    if min(args.shape) < 2:
        parser.error(f"argument --shape: every side must be >= 2, got {args.shape}")
    from parvox.volume import Phantom, ingest

    with tempfile.TemporaryDirectory(prefix="parvox-rounding-", dir=args.workdir) as tmp:
        store = Path(tmp) / "store"
        ingest(Phantom(tuple(args.shape), rgb=True), store, progress=True)
        r = measure(store, args.nplanes, args.repeats)
    print(f"{SIZE[0]}x{SIZE[1]} zoom-1 slices of a {'x'.join(map(str, args.shape))} RGB phantom, "
          f"warm, one process: median ms per slice's message over {args.nplanes} planes x "
          f"{args.repeats} passes")
    print(f"float32 {r['float32']:.3f} ms ({r['float32_kb']:.0f} kB), "
          f"rounded to uint8 {r['rounded']:.3f} ms ({r['rounded_kb']:.0f} kB)")
    print(f"ratio: rounded/float32 message = {r['rounded'] / r['float32']:.3f}")


if __name__ == "__main__":
    main()
