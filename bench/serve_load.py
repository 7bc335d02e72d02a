"""Load test of the slice server: N concurrent clients for T seconds, random oblique planes.

Usage::

    python bench/serve_load.py --url http://127.0.0.1:8000          # a running server
    python bench/serve_load.py --store STORE -n 4                    # start one, then load it
    python bench/serve_load.py --quick                               # small store, 2 ranks, 5 s
    python bench/serve_load.py --url ... --clients 1 --browse --size 512   # the seed's browsing

Prints a table (requests, requests/s, latency p50/p99, MB/s, busy answers, errors), the minor
page faults per slice and CPU time of each rank on this host during the load, then the
engine-only rate of the same planes (``parvox.slicing.SliceEngine`` at the same rank count,
one slice after the other, no HTTP and no encoding; needs ``--store``), the line
``ratio: server/engine slices per s = X`` and, last, ``errors: K`` (``errors: 0`` when every
request got its slice).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def random_query(rng: np.random.Generator, shape: list[int], size: int, fmt: str) -> str:
    """A random oblique plane through the inner part of the volume."""
    c = rng.uniform(0.25, 0.75, 3) * (np.asarray(shape) - 1)
    n = rng.normal(size=3)
    return (f"center={c[0]:.2f},{c[1]:.2f},{c[2]:.2f}&normal={n[0]:.4f},{n[1]:.4f},{n[2]:.4f}"
            f"&size={size},{size}&format={fmt}")


def browse_query(k: int, shape: list[int], size: int, fmt: str) -> str:
    """Slice ``k`` of a walk along the main diagonal, orthogonal to it (the seed's browsing
    experiment): successive slices one voxel apart, wrapping around."""
    shp = np.asarray(shape, dtype=np.float64) - 1
    t = 0.25 + 0.5 * ((k * 1.0 / np.linalg.norm(shp)) % 1.0)
    c = t * shp
    return (f"center={c[0]:.2f},{c[1]:.2f},{c[2]:.2f}&normal={shp[0]:.1f},{shp[1]:.1f},"
            f"{shp[2]:.1f}&size={size},{size}&format={fmt}")


async def client(url: str, shape: list[int], size: int, fmt: str, seed: int, until: float,
                 out: list[tuple[float, int, int, str]], browse: bool = False) -> None:
    rng = np.random.default_rng(seed)
    k = seed * 1000
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        while time.perf_counter() < until:
            t0 = time.perf_counter()
            k += 1
            q = browse_query(k, shape, size, fmt) if browse else random_query(rng, shape, size, fmt)
            try:
                r = await http.get("/api/slice?" + q)
                out.append((time.perf_counter() - t0, r.status_code, len(r.content), q))
            except httpx.HTTPError:
                out.append((time.perf_counter() - t0, -1, 0, q))


async def load(url: str, clients: int, seconds: float, size: int, fmt: str,
               browse: bool = False) -> list:
    info = httpx.get(url + "/api/info", timeout=60).json()
    out: list[tuple[float, int, int, str]] = []
    until = time.perf_counter() + seconds
    tasks = [client(url, info["shape"], size, fmt, k, until, out, browse) for k in range(clients)]

    async def progress() -> None:
        from tqdm import tqdm

        with tqdm(total=int(seconds), unit="s", desc="load", leave=False) as bar:
            while time.perf_counter() < until:
                await asyncio.sleep(1)
                bar.update(1)
                bar.set_postfix(requests=len(out))

    await asyncio.gather(progress(), *tasks)
    return out


def query_plane(q: str, spacing):
    """The :class:`~parvox.slicing.Plane` of a slice query (center, normal, size)."""
    from parvox.slicing import Plane

    kv = dict(part.split("=", 1) for part in q.split("&"))
    vec = [tuple(float(x) for x in kv[k].split(",")) for k in ("center", "normal", "size")]
    size = (int(vec[2][0]), int(vec[2][1]))
    return Plane.from_normal(vec[0], vec[1], size, spacing=spacing)


def engine_worker(store: str, queries: str, result: str) -> None:
    """Under mpiexec: extract the queries' planes one after the other; rank 0 writes the rate."""
    from mpi4py import MPI

    from parvox.slicing import SliceEngine

    comm = MPI.COMM_WORLD
    qs = json.loads(Path(queries).read_text())
    with SliceEngine(store) as eng:
        ps = [query_plane(q, eng.source.meta.spacing) for q in qs]
        eng.extract(ps[0])  # compiled kernels, threads
        comm.Barrier()
        t0 = time.perf_counter()
        for p in ps:
            eng.extract(p)
        comm.Barrier()
        dt = time.perf_counter() - t0
    if comm.Get_rank() == 0:
        Path(result).write_text(json.dumps({"slices": len(ps), "seconds": dt}))


def engine_rate(store: str, nprocs: int, queries: list[str]) -> float:
    """Slices/s of the engine alone on ``queries`` at ``nprocs`` ranks."""
    import subprocess

    from parvox.launch import launch_command

    work = Path(tempfile.mkdtemp(prefix="parvox-engine-"))
    (work / "q.json").write_text(json.dumps(queries))
    argv = [str(Path(__file__).resolve()), "--engine-worker", "--store", store,
            "--queries", str(work / "q.json"), "--result", str(work / "r.json")]
    subprocess.run(launch_command(nprocs, argv), check=True)
    r = json.loads((work / "r.json").read_text())
    return r["slices"] / r["seconds"]


def rank_counters(pids: list[int]) -> list[tuple[int, float, float]] | None:
    """``(minor faults, user s, system s)`` of each local rank process (``/proc``); ``None``
    where a rank cannot be read (another host, not Linux)."""
    import os

    tick = os.sysconf("SC_CLK_TCK")
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        out.append((int(f[7]), int(f[11]) / tick, int(f[12]) / tick))
    return out


def start_server(store: str, nprocs: int, extra: list[str] | None = None):
    sys.path.insert(0, str(ROOT))
    from tests.server._helpers import Server

    return Server(store, nprocs, *(extra or []),
                  logdir=tempfile.mkdtemp(prefix="parvox-load-")).wait_ready()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a running server (default: start one on --store)")
    ap.add_argument("--store", help="the store: served when no --url is given; the engine-only "
                    "run reads it")
    ap.add_argument("-n", type=int, default=2, help="ranks of the server started here")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=256, help="slice side in pixels")
    ap.add_argument("--format", default="png", choices=["png", "jpeg", "npy"])
    ap.add_argument("--browse", action="store_true",
                    help="each client steps along the main diagonal (warm cache) instead of "
                         "random oblique planes")
    ap.add_argument("--quick", action="store_true", help="small store, 5 s")
    ap.add_argument("--serve-args", default="",
                    help="extra options of the server started here, e.g. "
                         "'--config map.json --png-level 6' (a single option needs the = "
                         "form: --serve-args=--no-heap-retain)")
    ap.add_argument("--engine-slices", type=int, default=200,
                    help="planes (of those requested) the engine-only run extracts")
    ap.add_argument("--engine-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--queries", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for name, flag in (("clients", "--clients"), ("seconds", "--seconds"), ("size", "--size"),
                       ("n", "-n")):
        if getattr(args, name) <= 0:
            ap.error(f"argument {flag}: must be > 0, got {getattr(args, name)}")
    if args.engine_slices < 0:
        ap.error(f"argument --engine-slices: must be >= 0, got {args.engine_slices}")
    if args.engine_worker:
        engine_worker(args.store, args.queries, args.result)
        return 0
    server = None
    if args.quick:
        args.seconds = min(args.seconds, 5.0)
    if args.url is None:
        store = args.store
        if store is None:
            sys.path.insert(0, str(ROOT))
            from tests.server._helpers import make_store_in_subprocess

            store = str(make_store_in_subprocess(Path(tempfile.mkdtemp()) / "store"))
            args.store = store
        server = start_server(store, args.n, args.serve_args.split())
        args.url = server.url
    try:
        pids = [r["pid"] for r in httpx.get(args.url + "/api/stats", timeout=30).json()["ranks"]
                if r.get("pid")]
        before = rank_counters(pids)
        t0 = time.perf_counter()
        out = asyncio.run(load(args.url, args.clients, args.seconds, args.size, args.format,
                               args.browse))
        wall = time.perf_counter() - t0
        after = rank_counters(pids)
        stats = httpx.get(args.url + "/api/stats", timeout=30).json()
    finally:
        if server is not None:
            server.stop()
    lat = np.array([o[0] for o in out]) * 1e3
    codes = np.array([o[1] for o in out])
    ok = codes == 200
    nbytes = sum(o[2] for o in out if o[1] == 200)
    busy = int((codes == 503).sum())
    errors = int((~ok).sum())
    print(f"server {args.url}  ranks {len(stats['ranks'])}  clients {args.clients}  "
          f"{args.size}x{args.size} {args.format}  {'browse' if args.browse else 'random'}  "
          f"{wall:.1f} s")
    print(f"{'requests':>10} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'MB/s':>8} "
          f"{'busy':>6} {'errors':>7} {'hit rate':>9}")
    p50, p99 = (np.percentile(lat[ok], [50, 99]) if ok.any() else (float("nan"),) * 2)
    hit = stats.get("cache_hit_rate") or 0.0
    print(f"{len(out):>10} {ok.sum() / wall:>8.1f} {p50:>8.1f} {p99:>8.1f} "
          f"{nbytes / wall / 1e6:>8.2f} {busy:>6} {errors:>7} {hit:>9.3f}")
    served = ok.sum() / wall
    if before is not None and after is not None and ok.any():
        for r, (b, a) in enumerate(zip(before, after, strict=True)):
            print(f"rank {r}: {(a[0] - b[0]) / ok.sum():.0f} minor page faults per slice, "
                  f"CPU {a[1] - b[1]:.1f} s user + {a[2] - b[2]:.1f} s system")
    sends = [r.get("messages", {}) for r in stats["ranks"]]
    print("dataflow messages / MPI sends per rank: "
          + ", ".join(f"{m.get('sent', 0)}/{m.get('mpi_sends', 0)}" for m in sends))
    if args.engine_slices == 0:
        print("engine only: not measured (--engine-slices 0)")
        print("ratio: server/engine slices per s = nan")
    elif args.store is not None and ok.any():
        queries = [o[3] for o in out if o[1] == 200][: args.engine_slices]
        rate = engine_rate(args.store, len(stats["ranks"]), queries)
        print(f"engine only, the same {len(queries)} planes at {len(stats['ranks'])} ranks, "
              f"one at a time: {rate:.1f} slices/s")
        print(f"ratio: server/engine slices per s = {served / rate:.3f}")
    else:
        print("engine only: not measured (give --store)")
        print("ratio: server/engine slices per s = nan")
    print(f"errors: {errors}")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
