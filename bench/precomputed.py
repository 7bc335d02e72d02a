"""Neuroglancer precomputed: tensorstore reading random 64^3 regions through ``parvox serve``
against the same regions of a static ``--format precomputed`` export read from disk.

Usage::

    python bench/precomputed.py                       # 256^3 uint8, extents 64^3, 2 ranks
    python bench/precomputed.py --quick               # 128^3, fewer regions
    python bench/precomputed.py --shape 384,384,384 --regions 100 -n 2
    python bench/precomputed.py --concurrency 1       # one region after the other

It ingests a volume (smooth, with noise) into a store with extents ``--extent`` (the served
chunk), exports it (``parvox export STORE OUT --format precomputed -n N``), starts
``parvox serve STORE -n N``, and reads ``--regions`` random 64^3 regions (not aligned to the
chunks) with tensorstore's ``neuroglancer_precomputed`` driver over ``http://`` and over
``file://``, ``--concurrency`` regions at a time (a viewer asks for a view's chunks together),
tensorstore's cache off. Both sources are read once
before the timed passes (the server's extent cache and the OS page cache both warm), every
region is checked equal between the two, and the best of ``--passes`` timed passes of each is
reported. Prints the MB/s of each and, last, ``ratio: served/static MB/s = X`` (target >= 0.5).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

_MAKE = """
import numpy as np
from mpi4py import MPI
from parvox.volume import ingest_array
shape, extent, path = {shape!r}, {extent!r}, {path!r}
z, y, x = np.ogrid[: shape[0], : shape[1], : shape[2]]
r = np.sqrt(((z - shape[0] / 2) / shape[0]) ** 2 + ((y - shape[1] / 2) / shape[1]) ** 2
            + ((x - shape[2] / 2) / shape[2]) ** 2)
vol = 120 + 90 * np.cos(9 * r) + 0.3 * x - 0.2 * y
vol = vol + np.random.default_rng(0).normal(0, 6, shape)
ingest_array(np.clip(vol, 0, 255).astype(np.uint8), path, extent=extent, ndisks=4,
             spacing=(1.0, 1.0, 1.0), progress=False, comm=MPI.COMM_SELF)
"""


def _env() -> dict[str, str]:
    src = str(ROOT / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "PYTHONUNBUFFERED": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(store: Path, nprocs: int, log: Path) -> Iterator[str]:
    """``parvox serve STORE -n N`` on a free port until the block ends; its base URL."""
    import httpx

    port = _free_port()
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "parvox", "serve", str(store), "-n", str(nprocs), "--port",
             str(port), "--dead-after", "60"],
            stdout=fh, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start:\n{log.read_text()}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                time.sleep(0.3)
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def read_all(t, boxes: list[tuple[int, int, int]], side: int,
             concurrency: int) -> tuple[float, list[np.ndarray]]:
    """Read every region (x, y, z corners), ``concurrency`` regions in flight at once (as a
    viewer asks for the chunks of a view together); seconds and the arrays."""
    out: list[np.ndarray] = []
    t0 = time.perf_counter()
    for s in range(0, len(boxes), concurrency):
        futures = [t[x : x + side, y : y + side, z : z + side].read()
                   for x, y, z in boxes[s : s + concurrency]]
        out += [np.asarray(f.result()) for f in futures]
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="256,256,256", help="volume z,y,x (default 256^3)")
    p.add_argument("--extent", default="64,64,64", help="store extent = served chunk, z,y,x")
    p.add_argument("--side", type=int, default=64, help="region side (default 64)")
    p.add_argument("--regions", type=int, default=40, help="random regions per pass")
    p.add_argument("--passes", type=int, default=3, help="timed passes (best reported)")
    p.add_argument("--concurrency", type=int, default=4,
                   help="regions read at once (default 4; 1: one after the other)")
    p.add_argument("-n", "--nprocs", type=int, default=2, help="server ranks (default 2)")
    p.add_argument("--quick", action="store_true", help="128^3, 16 regions, 2 passes")
    p.add_argument("--workdir", default=None, help="where the store and export go (a temp dir)")
    args = p.parse_args(argv)
    if args.quick:
        args.shape, args.regions, args.passes = "128,128,128", 16, 2
    import tensorstore as ts

    shape = tuple(int(v) for v in args.shape.split(","))
    extent = tuple(int(v) for v in args.extent.split(","))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="parvox-bench-precomputed-"))
    store, static = work / "vol.store", work / "vol.precomputed"
    if not (store / "volume.json").is_file():
        subprocess.run([sys.executable, "-c", _MAKE.format(shape=shape, extent=extent,
                                                           path=str(store))],
                       check=True, env=_env())
    if not (static / "info").is_file():
        subprocess.run([sys.executable, "-m", "parvox", "export", str(store), str(static),
                        "--format", "precomputed", "-n", str(args.nprocs), "--no-progress"],
                       check=True, env=_env())
    rng = np.random.default_rng(1)
    side = args.side
    boxes = [tuple(int(rng.integers(0, n - side + 1)) for n in shape[::-1])
             for _ in range(args.regions)]
    mb = args.regions * side**3 / 1e6  # uint8
    spec = {"driver": "neuroglancer_precomputed", "scale_index": 0,
            "context": {"cache_pool": {"total_bytes_limit": 0}}}
    with serving(store, args.nprocs, work / "server.log") as url:
        served = ts.open({**spec, "kvstore": f"{url}/precomputed/"}).result()
        disk = ts.open({**spec, "kvstore": f"file://{static}/"}).result()
        _, a = read_all(served, boxes, side, args.concurrency)  # warm both, and check they agree
        _, b = read_all(disk, boxes, side, args.concurrency)
        if not all(np.array_equal(u, v) for u, v in zip(a, b, strict=True)):
            print("error: served and static regions differ", file=sys.stderr)
            return 1
        t_served = min(read_all(served, boxes, side, args.concurrency)[0] for _ in range(args.passes))
        t_static = min(read_all(disk, boxes, side, args.concurrency)[0] for _ in range(args.passes))
    s_mb, d_mb = mb / t_served, mb / t_static
    print(f"volume {'x'.join(map(str, shape))} uint8, chunks (extents) "
          f"{'x'.join(map(str, extent))}, {args.regions} random {side}^3 regions, "
          f"{args.concurrency} at a time, best of {args.passes} passes, tensorstore cache off")
    print(f"served  (parvox serve -n {args.nprocs}, http://): {s_mb:8.1f} MB/s "
          f"({t_served / args.regions * 1e3:.1f} ms per region)")
    print(f"static  (--format precomputed, file://):    {d_mb:8.1f} MB/s "
          f"({t_static / args.regions * 1e3:.1f} ms per region)")
    print(f"ratio: served/static MB/s = {s_mb / d_mb:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
