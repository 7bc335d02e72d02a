"""Benchmark: the slice server's PNG encoder against Pillow's, on a smooth and a noisy slice.

Two 512x512 RGB slices (``--size``): the middle axial slice of a 512^3 RGB phantom
(:class:`parvox.volume.Phantom`, as ``./run``'s: smooth regions, it compresses), and the same
slice with uniform noise added to every byte (camera noise: it does not). For each it times, median of
``--repeats`` calls, in one process:

- ``parvox``: :func:`parvox.server.png.encode_png` at level 1 (what the server sends);
- ``deflate``: ISA-L's level-1 deflate of the same filtered rows alone, what the encoder spent
  before it stored rows that do not compress;
- ``pillow``: Pillow's PNG at zlib level 1 (``compress_level=1``), the fastest it offers.

Every PNG is decoded by Pillow and compared with the slice. The last line is
``ratio: parvox/pillow png noisy = X``.

Usage::

    python bench/encode.py              # 512x512, 20 calls each
    python bench/encode.py --size 256 --repeats 5
"""

from __future__ import annotations

import argparse
import io
from typing import Any

import numpy as np
from _shared import median_ms


def slices(size: int) -> dict[str, np.ndarray]:
    """``{"smooth": ..., "noisy": ...}``: ``(size, size, 3)`` uint8 slices of the phantom."""
    from parvox.volume import Phantom

    smooth = Phantom((size, size, size), rgb=True).read_slab(size // 2, size // 2 + 1)[0]
    noise = np.random.default_rng(0).integers(0, 256, smooth.shape, dtype=np.uint8)
    return {"smooth": smooth, "noisy": smooth + noise}  # uint8 wraps: every byte random


def measure(img: np.ndarray, repeats: int) -> dict[str, Any]:
    """Times and sizes of the three encoders on ``img``; the PNGs checked by Pillow."""
    from isal import isal_zlib
    from PIL import Image

    from parvox.server.png import encode_png

    rows = img.reshape(img.shape[0], -1)
    filtered = np.empty((rows.shape[0], rows.shape[1] + 1), np.uint8)
    filtered[:, 0] = 2
    filtered[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])

    def pillow() -> bytes:
        out = io.BytesIO()
        Image.fromarray(img).save(out, format="PNG", compress_level=1)
        return out.getvalue()

    ours, theirs = encode_png(img), pillow()
    for data in (ours, theirs):
        if not np.array_equal(np.asarray(Image.open(io.BytesIO(data))), img):
            raise SystemExit("a PNG did not decode to the slice")
    return {
        "parvox": median_ms(lambda: encode_png(img), repeats), "parvox_kb": len(ours) / 1e3,
        "deflate": median_ms(lambda: isal_zlib.compress(filtered.data, 1), repeats),
        "pillow": median_ms(pillow, repeats), "pillow_kb": len(theirs) / 1e3,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512, help="slice side (default 512)")
    parser.add_argument("--repeats", type=int, default=20, help="calls per encoder (default 20)")
    args = parser.parse_args(argv)
    if args.size < 2:
        parser.error(f"argument --size: must be >= 2, got {args.size}")
    if args.repeats < 1:
        parser.error(f"argument --repeats: must be >= 1, got {args.repeats}")
    results = {name: measure(img, args.repeats) for name, img in slices(args.size).items()}
    print(f"PNG of a {args.size}x{args.size} RGB slice, median ms of {args.repeats} calls "
          f"(deflate: ISA-L level 1 of the filtered rows alone)")
    print(f"{'slice':<8}{'parvox':>9}{'kB':>8}{'deflate':>9}{'pillow':>9}{'kB':>8}")
    for name, r in results.items():
        print(f"{name:<8}{r['parvox']:>9.3f}{r['parvox_kb']:>8.0f}{r['deflate']:>9.3f}"
              f"{r['pillow']:>9.3f}{r['pillow_kb']:>8.0f}")
    noisy = results["noisy"]
    print(f"ratio: parvox/pillow png noisy = {noisy['parvox'] / noisy['pillow']:.3f}")


if __name__ == "__main__":
    main()
