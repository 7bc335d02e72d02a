"""Load test of the slice server against the slice engine: N clients for T seconds, same planes.

What the ``ratio:`` line compares (issue 29, target 6: the server delivers at least 0.9x the
engine's slices/s):

- **the server**: ``parvox serve`` at ``-n`` ranks (2 by default), ``--clients`` concurrent
  HTTP/1.1 keep-alive clients requesting ``GET /api/slice`` (PNG by default, what the viewer
  shows at rest) for ``--seconds``; the rate is the answered slices per second of wall time,
  HTTP, merge and encoding included;
- **the engine**: :class:`parvox.slicing.SliceEngine` at the same rank count, alone on the
  machine (before the server starts and after it stopped), extracting the same planes one
  after the other: no HTTP, no encoding; the rate is the slices of its timed passes over the
  planes (for ``--engine-seconds``, 2 s) per second of their wall time, the mean of the run
  before and the run after the server (on a shared machine the load drifts in between; with
  ``--planes browse/random`` or ``--url`` only the run after).

With ``--planes warm`` (the default, and ``--quick``) the planes are ``bench/slicing.py``'s
warm case, the engine target's: ``--nplanes`` 512x512 zoom-1 slices orthogonal to the volume's
main diagonal, one voxel apart around its middle. Both sides are warm: the server answers
one untimed pass over the planes before the clients start (each client then cycles through
them from its own offset), the engine makes one untimed pass before its timed ones, so every
extent comes from the ranks' caches. ``--quick`` loads ``bench/slicing.py --quick``'s volume
(the RGB phantom, 320x416x672, 4 disks; built once under ``--workdir`` and kept) for 5 s.
``--planes browse`` has each client step along the main diagonal from its own start (the
seed's browsing experiment), ``--planes random`` requests random oblique planes; in those two
the engine extracts the first ``--engine-slices`` planes answered, with one untimed pass too.

The clients are ``--client raw`` (default): a minimal asyncio HTTP/1.1 client (one keep-alive
connection each, ``Content-Length`` bodies, a read buffer larger than any slice so that reading
never pauses; 0.1-0.25 ms of CPU per request), so the load generator takes little of the cores
the server runs on; ``--client httpx`` uses httpx.

Usage::

    python bench/serve_load.py --quick                        # 2 ranks, 512^2 warm PNG, 5 s
    python bench/serve_load.py --store STORE -n 2 --seconds 20     # start a server, load it
    python bench/serve_load.py --url http://127.0.0.1:8000 --planes random --size 256

Prints a table (requests, requests/s, latency p50/p99, MB/s, busy answers, errors, cache hit
rate), the CPU seconds of the client process (and the mean bytes of a slice) and of each rank
on this host during the load (and minor page faults per slice; then by thread: ``main`` runs
HTTP on rank 0, ``dispatch`` splits, merges and encodes, ``slice-extract`` and ``slice-read``
are the stages, ``dataflow-comm`` the messages), the host's idle share during the load
(``/proc/stat``), the engine-only rate of the same planes (needs ``--store``) with each rank's
time to its parts ready, the line ``ratio: server/engine slices per s = X`` and, last,
``errors: K`` (``errors: 0`` when every request got its slice).

For PNG and JPEG on a local server, with no more ranks than cores, it also prints a
**ceiling**: the ratio a server would
reach on this host's cores if its only work per slice were the engine's (the sum of the
ranks' times to parts ready: the split, the reads and the extraction, where the engine splits
on every rank; its root's merge not counted) plus what the engine never does, as measured in
the same run (rank 0's main thread, which runs HTTP; the client's CPU; an answered slice
encoded again by the server's encoder), with no cost of its own and no idle core. The
measured ratio's distance below it is the server's own cost: its threads' hand-offs, its
messages and its idle time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: disks of ``bench/slicing.py --quick``'s store (its default ``--disks``)
QUICK_DISKS = 4


# -- the planes ------------------------------------------------------------------------------
def plane_query(center, normal, size: int, fmt: str) -> str:
    """The ``/api/slice`` query of the plane through ``center`` normal to ``normal`` (numbers
    written exactly, so the server and the engine cut the same plane)."""
    c = ",".join(repr(float(x)) for x in center)
    n = ",".join(repr(float(x)) for x in normal)
    return f"center={c}&normal={n}&size={size},{size}&format={fmt}"


def warm_queries(shape, nplanes: int, size: int, fmt: str) -> list[str]:
    """``bench/slicing.py``'s warm planes: orthogonal to the main diagonal, one voxel apart
    around its middle (``browse_planes`` there)."""
    diag = np.asarray(shape, dtype=float) - 1
    unit = diag / np.linalg.norm(diag)
    steps = np.arange(nplanes) - (nplanes - 1) / 2
    return [plane_query(diag / 2 + k * unit, diag, size, fmt) for k in steps]


def random_query(rng: np.random.Generator, shape, size: int, fmt: str) -> str:
    """A random oblique plane through the inner part of the volume."""
    c = rng.uniform(0.25, 0.75, 3) * (np.asarray(shape) - 1)
    return plane_query(np.round(c, 2), np.round(rng.normal(size=3), 4), size, fmt)


def browse_query(k: int, shape, size: int, fmt: str) -> str:
    """Slice ``k`` of a walk along the main diagonal, orthogonal to it (the seed's browsing
    experiment): successive slices one voxel apart, wrapping around."""
    shp = np.asarray(shape, dtype=np.float64) - 1
    t = 0.25 + 0.5 * ((k * 1.0 / np.linalg.norm(shp)) % 1.0)
    return plane_query(np.round(t * shp, 2), shp, size, fmt)


def query_plane(q: str, spacing):
    """The :class:`~parvox.slicing.Plane` of a slice query, parsed as the server parses it."""
    from parvox.slicing.params import parse_plane

    return parse_plane(dict(part.split("=", 1) for part in q.split("&")), spacing)


# -- the clients -----------------------------------------------------------------------------
class RawClient:
    """One HTTP/1.1 keep-alive connection, bare asyncio streams: ``GET`` and read a
    ``Content-Length`` body (what the server sends); reconnects after an error or a
    ``Connection: close``."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def get(self, path: str) -> tuple[int, bytes]:
        """``(status, body)`` of ``GET path``; OSError/ValueError on a broken answer."""
        if self.streams is None:  # a buffer limit above a slice: reading never pauses
            self.streams = await asyncio.open_connection(self.host, self.port, limit=1 << 24)
        reader, writer = self.streams
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode("latin-1"))
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            fields = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
            fields = {k.strip().lower(): v.strip() for k, v in fields.items()}
            body = await reader.readexactly(int(fields["content-length"]))
        except (OSError, ValueError, KeyError, IndexError, asyncio.IncompleteReadError) as exc:
            await self.close()
            raise OSError(f"GET {path}: {exc!r}") from exc
        if fields.get("connection", "").lower() == "close":
            await self.close()
        return status, body

    async def close(self) -> None:
        if self.streams is not None:
            writer = self.streams[1]
            self.streams = None
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass


class HttpxClient:
    """The same interface on httpx (about ten times the client CPU per request)."""

    def __init__(self, url: str) -> None:
        import httpx

        self.http = httpx.AsyncClient(base_url=url, timeout=120)

    async def get(self, path: str) -> tuple[int, bytes]:
        import httpx

        try:
            r = await self.http.get(path)
        except httpx.HTTPError as exc:
            raise OSError(f"GET {path}: {exc!r}") from exc
        return r.status_code, r.content

    async def close(self) -> None:
        await self.http.aclose()


CLIENTS = {"raw": RawClient, "httpx": HttpxClient}


async def client(make, queries, until: float, out: list[tuple[float, int, int, str]]) -> None:
    """Request ``next(queries)`` until ``until``; record (seconds, status, bytes, query)."""
    http = make()
    try:
        while time.perf_counter() < until:
            q = next(queries)
            t0 = time.perf_counter()
            try:
                status, body = await http.get("/api/slice?" + q)
                out.append((time.perf_counter() - t0, status, len(body), q))
            except OSError:
                out.append((time.perf_counter() - t0, -1, 0, q))
    finally:
        await http.close()


def query_streams(planes: str, shape, size: int, fmt: str, clients: int, nplanes: int):
    """One endless iterator of queries per client."""
    import itertools

    if planes == "warm":
        qs = warm_queries(shape, nplanes, size, fmt)
        return [itertools.islice(itertools.cycle(qs), (k * len(qs)) // clients, None)
                for k in range(clients)]
    if planes == "browse":
        return [(browse_query(k * 1000 + i, shape, size, fmt) for i in itertools.count(1))
                for k in range(clients)]
    return [(random_query(rng, shape, size, fmt) for _ in itertools.count())
            for rng in (np.random.default_rng(k) for k in range(clients))]


async def load(url: str, make, streams, seconds: float, progress: bool = True) -> list:
    """Run one client per stream for ``seconds``; every answer, in the order they came."""
    out: list[tuple[float, int, int, str]] = []
    until = time.perf_counter() + seconds
    tasks = [client(make, s, until, out) for s in streams]

    async def bar() -> None:
        from tqdm import tqdm

        with tqdm(total=int(seconds), unit="s", desc="load", leave=False) as b:
            while time.perf_counter() < until:
                await asyncio.sleep(1)
                b.update(1)
                b.set_postfix(requests=len(out))

    await asyncio.gather(*([bar()] if progress else []), *tasks)
    return out


async def warm_up(url: str, make, queries: list[str], clients: int) -> int:
    """Request every query once (``clients`` at a time); the failures."""
    out: list[tuple[float, int, int, str]] = []

    async def one(chunk: list[str]) -> None:
        http = make()
        try:
            for q in chunk:
                try:
                    status, body = await http.get("/api/slice?" + q)
                    out.append((0.0, status, len(body), q))
                except OSError:
                    out.append((0.0, -1, 0, q))
        finally:
            await http.close()

    await asyncio.gather(*(one(queries[k::clients]) for k in range(clients)))
    return sum(1 for o in out if o[1] != 200)


# -- the engine alone ------------------------------------------------------------------------
def engine_worker(store: str, queries: str, result: str, seconds: float) -> None:
    """Under mpiexec: one untimed pass over the queries' planes, then timed passes until
    ``seconds`` have passed (at least one); rank 0 writes the rate, the median slice's
    time and each rank's mean time to its parts ready (``SliceEngine.stats.seconds``: the
    split, the reads and the extraction, before the gather)."""
    from mpi4py import MPI

    from parvox.slicing import SliceEngine

    comm = MPI.COMM_WORLD
    qs = json.loads(Path(queries).read_text())
    with SliceEngine(store) as eng:
        ps = [query_plane(q, eng.source.meta.spacing) for q in qs]
        for p in ps:  # compiled kernels, threads, the extent caches
            eng.extract(p)
        times: list[float] = []
        ready: list[float] = []
        comm.Barrier()
        t0 = time.perf_counter()
        more = True
        while more:
            for p in ps:
                t1 = time.perf_counter()
                eng.extract(p)
                times.append(time.perf_counter() - t1)
                ready.append(eng.stats.seconds)
            more = comm.bcast(time.perf_counter() - t0 < seconds, root=0)
        comm.Barrier()
        dt = time.perf_counter() - t0
    ready_by_rank = comm.gather(float(np.mean(ready)), root=0)
    if comm.Get_rank() == 0:
        Path(result).write_text(json.dumps({"slices": len(times), "seconds": dt,
                                            "median": float(np.median(times)),
                                            "ready": ready_by_rank}))


def engine_rate(store: str, nprocs: int, queries: list[str],
                seconds: float) -> tuple[float, float, list[float]]:
    """Slices/s of the engine alone on ``queries`` at ``nprocs`` ranks (warm, passes over
    them for ``seconds``): over the timed passes, one over the median slice's time, and each
    rank's mean seconds to its parts ready (:func:`engine_worker`)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _shared import run_worker_report

    with tempfile.TemporaryDirectory(prefix="parvox-engine-") as tmp:
        work = Path(tmp)
        (work / "q.json").write_text(json.dumps(queries))
        argv = [str(Path(__file__).resolve()), "--engine-worker", "--store", store,
                "--queries", str(work / "q.json"), "--result", str(work / "r.json"),
                "--engine-seconds", str(seconds)]
        r = run_worker_report(nprocs, argv, work / "r.json", echo=True)
    return r["slices"] / r["seconds"], 1.0 / r["median"], r["ready"]


# -- the server ------------------------------------------------------------------------------
def rank_counters(pids: list[int]) -> list[tuple[int, float, float]] | None:
    """``(minor faults, user s, system s)`` of each local rank process (``/proc``); ``None``
    where a rank cannot be read (another host, not Linux)."""
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


def host_jiffies() -> tuple[int, int] | None:
    """``(idle, total)`` CPU time of the whole host so far, in clock ticks (``/proc/stat``;
    iowait counts as idle, a guest's time is inside user time); ``None`` where it cannot be
    read."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            ticks = [int(x) for x in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return ticks[3] + ticks[4], sum(ticks)


def encode_ms(body: bytes, fmt: str, png_level: int, repeats: int = 20) -> float:
    """Median milliseconds the server's encoder (:func:`parvox.server.imaging.encode_image`)
    takes to encode again the image of ``body``, a PNG or JPEG slice it answered (one untimed
    call first)."""
    import io

    from PIL import Image

    from parvox.server.imaging import encode_image

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _shared import median_ms

    pixels = np.asarray(Image.open(io.BytesIO(body)))
    return median_ms(lambda: encode_image(pixels, fmt, png_level=png_level), repeats)


def served_png_level(serve_args: list[str]) -> int:
    """The ``--png-level`` among the server's options (the server's default without one)."""
    from parvox.server.imaging import DEFAULT_PNG_LEVEL

    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--png-level", type=int, default=DEFAULT_PNG_LEVEL)
    return ap.parse_known_args(serve_args)[0].png_level


def ceiling(cores: int, engine_rate: float, engine_work: float, extra: float) -> float:
    """The highest server/engine ratio ``cores`` cores allow: a server whose only work per
    slice was the engine's (``engine_work`` seconds, its ranks' busy time) plus ``extra``
    seconds of what the engine never does (HTTP, the client, the encoding), with no cost of
    its own and no core ever idle, would answer ``cores / (engine_work + extra)`` slices/s.

    Examples
    --------
    >>> round(ceiling(2, engine_rate=200.0, engine_work=0.008, extra=0.002), 3)
    1.0
    """
    return cores / (engine_work + extra) / engine_rate


def thread_cpu(pid: int) -> dict[str, tuple[str, float]]:
    """CPU seconds (user + system) of each thread of local process ``pid``, by thread id, with
    the thread's name as the operating system has it (parvox names its threads:
    :func:`parvox.threads.set_native_name`); ``{}`` where it cannot be read."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm", encoding="utf-8") as fh:
                name = fh.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # (a thread that ended meanwhile)
            continue
        out[tid] = (name, (int(f[11]) + int(f[12])) / tick)
    return out


def thread_groups(before: dict[str, tuple[str, float]], after: dict[str, tuple[str, float]],
                  pid: int) -> dict[str, float]:
    """CPU seconds between two :func:`thread_cpu` readings of process ``pid`` by thread
    group: the name less a worker's number (``dispatch_3`` and ``dispatch_4``: ``dispatch``),
    ``main`` for the process's first thread, largest first."""
    groups: dict[str, float] = {}
    for tid, (name, cpu) in after.items():
        key = "main" if tid == str(pid) else name.rstrip("0123456789").rstrip("_-") or name
        groups[key] = groups.get(key, 0.0) + cpu - before.get(tid, (name, 0.0))[1]
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]))


def start_server(store: str, nprocs: int, extra: list[str] | None = None):
    sys.path.insert(0, str(ROOT))
    from tests.server._helpers import Server

    return Server(store, nprocs, *(extra or []),
                  logdir=tempfile.mkdtemp(prefix="parvox-load-")).wait_ready()


def quick_store(workdir: Path) -> str:
    """``bench/slicing.py --quick``'s store under ``workdir`` (built once, then reused)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from slicing import build_store, volume_shape

    return str(build_store(workdir, volume_shape(quick=True), QUICK_DISKS))


def get_json(url: str) -> dict:
    import httpx

    return httpx.get(url, timeout=60).json()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a running server (default: start one on --store)")
    ap.add_argument("--store", help="the store: served when no --url is given; the engine-only "
                    "run reads it")
    ap.add_argument("-n", type=int, default=2, help="ranks of the server started here")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--client", default="raw", choices=sorted(CLIENTS),
                    help="the HTTP client (raw: a minimal asyncio one)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=512, help="slice side in pixels")
    ap.add_argument("--format", default="png", choices=["png", "jpeg", "npy"])
    ap.add_argument("--planes", default="warm", choices=["warm", "browse", "random"],
                    help="warm: bench/slicing.py's warm planes, cycled (default); browse: "
                         "each client walks the main diagonal; random: random oblique planes")
    ap.add_argument("--browse", action="store_const", const="browse", dest="planes",
                    help="the same as --planes browse")
    ap.add_argument("--nplanes", type=int, default=48, help="planes of --planes warm")
    ap.add_argument("--quick", action="store_true",
                    help="bench/slicing.py --quick's volume, 5 s")
    ap.add_argument("--workdir", default="/tmp/parvox-bench-slicing-quick",
                    help="where --quick's store lives (shared with bench/slicing.py --quick)")
    ap.add_argument("--serve-args", default="",
                    help="extra options of the server started here, e.g. "
                         "'--config map.json --png-level 6' (a single option needs the = "
                         "form: --serve-args=--no-heap-retain)")
    ap.add_argument("--engine-slices", type=int, default=200,
                    help="planes (of those answered) the engine-only run extracts with "
                         "--planes browse/random; 0: no engine run (any --planes)")
    ap.add_argument("--engine-seconds", type=float, default=2.0,
                    help="the engine's timed passes over the planes last this long (at "
                         "least one pass)")
    ap.add_argument("--engine-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--queries", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for name, flag in (("clients", "--clients"), ("seconds", "--seconds"), ("size", "--size"),
                       ("n", "-n"), ("nplanes", "--nplanes")):
        if getattr(args, name) <= 0:
            ap.error(f"argument {flag}: must be > 0, got {getattr(args, name)}")
    if not args.engine_seconds >= 0:
        ap.error(f"argument --engine-seconds: must be >= 0, got {args.engine_seconds}")
    if args.engine_slices < 0:
        ap.error(f"argument --engine-slices: must be >= 0, got {args.engine_slices}")
    if args.engine_worker:
        engine_worker(args.store, args.queries, args.result, args.engine_seconds)
        return 0
    if args.quick:
        args.seconds = min(args.seconds, 5.0)
        if args.store is None and args.url is None:
            args.store = quick_store(Path(args.workdir))
    server = None
    # the engine's rate and its ranks' seconds to parts ready, before the server (warm planes)
    first: list[tuple[float, list[float]]] = []
    if args.url is None:
        if args.store is None:
            ap.error("give --url, --store or --quick")
        if args.planes == "warm" and args.engine_slices:
            from parvox.volume import VolumeStore

            shape = VolumeStore(args.store).meta.shape
            rate, _, ready = engine_rate(args.store, args.n, warm_queries(
                shape, args.nplanes, args.size, args.format), args.engine_seconds)
            first.append((rate, ready))
        server = start_server(args.store, args.n, args.serve_args.split())
        args.url = server.url
    make = CLIENTS[args.client]
    try:
        info = get_json(args.url + "/api/info")
        streams = query_streams(args.planes, info["shape"], args.size, args.format,
                                args.clients, args.nplanes)
        warm = (warm_queries(info["shape"], args.nplanes, args.size, args.format)
                if args.planes == "warm" else [])
        failed = asyncio.run(warm_up(args.url, lambda: make(args.url), warm, args.clients))
        pids = [r["pid"] for r in get_json(args.url + "/api/stats")["ranks"] if r.get("pid")]
        before = rank_counters(pids)
        threads_before = [thread_cpu(pid) for pid in pids]
        host_before = host_jiffies()
        c0, t0 = time.process_time(), time.perf_counter()
        out = asyncio.run(load(args.url, lambda: make(args.url), streams, args.seconds))
        wall, client_cpu = time.perf_counter() - t0, time.process_time() - c0
        host_after = host_jiffies()
        after = rank_counters(pids)
        threads_after = [thread_cpu(pid) for pid in pids]
        stats = get_json(args.url + "/api/stats")
        answered = next((o[3] for o in out if o[1] == 200), None)
        encoding = None  # ms to encode an answered slice again, as the server does
        if answered is not None and args.format in ("png", "jpeg"):
            import httpx

            body = httpx.get(f"{args.url}/api/slice?{answered}", timeout=60).content
            encoding = encode_ms(body, args.format, served_png_level(args.serve_args.split()))
    finally:
        if server is not None:
            server.stop()
    lat = np.array([o[0] for o in out]) * 1e3
    codes = np.array([o[1] for o in out])
    ok = codes == 200
    nbytes = sum(o[2] for o in out if o[1] == 200)
    busy = int((codes == 503).sum())
    errors = int((~ok).sum()) + failed
    nranks = len(stats["ranks"])
    print(f"server {args.url}  ranks {nranks}  clients {args.clients} ({args.client})  "
          f"{args.size}x{args.size} {args.format}  planes {args.planes}"
          f"{f' ({args.nplanes}, warmed)' if args.planes == 'warm' else ''}  {wall:.1f} s  "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'requests':>10} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'MB/s':>8} "
          f"{'busy':>6} {'errors':>7} {'hit rate':>9}")
    p50, p99 = (np.percentile(lat[ok], [50, 99]) if ok.any() else (float("nan"),) * 2)
    hit = stats.get("cache_hit_rate") or 0.0
    print(f"{len(out):>10} {ok.sum() / wall:>8.1f} {p50:>8.1f} {p99:>8.1f} "
          f"{nbytes / wall / 1e6:>8.2f} {busy:>6} {errors:>7} {hit:>9.3f}")
    served = ok.sum() / wall
    nok = max(int(ok.sum()), 1)
    print(f"client ({args.client}): CPU {client_cpu:.2f} s, {1e3 * client_cpu / nok:.2f} ms "
          f"per slice; {nbytes / nok / 1e3:.1f} kB per slice")
    http = None  # rank 0's main thread (HTTP), CPU seconds per slice
    if before is not None and after is not None:
        for r, (b, a) in enumerate(zip(before, after, strict=True)):
            cpu = a[1] - b[1] + a[2] - b[2]
            print(f"rank {r}: CPU {a[1] - b[1]:.1f} s user + {a[2] - b[2]:.1f} s system, "
                  f"{1e3 * cpu / nok:.2f} ms per slice, {(a[0] - b[0]) / nok:.0f} minor page "
                  "faults per slice")
            groups = thread_groups(threads_before[r], threads_after[r], pids[r])
            if r == 0 and "main" in groups:
                http = groups["main"] / nok
            if groups:
                print(f"  rank {r} threads, CPU ms per slice: " + ", ".join(
                    f"{name} {1e3 * sec / nok:.2f}" for name, sec in groups.items() if sec > 0))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if None not in (host_before, host_after, before, after):  # (ranks on this host)
        idle, total = (a - b for a, b in zip(host_after, host_before, strict=True))
        print(f"host: {cores} cores, {100 * idle / max(total, 1):.1f} % idle during the load")
    sends = [r.get("messages", {}) for r in stats["ranks"]]
    print("dataflow messages / MPI sends per rank: "
          + ", ".join(f"{m.get('sent', 0)}/{m.get('mpi_sends', 0)}" for m in sends))
    queries = (warm if args.planes == "warm"
               else [o[3] for o in out if o[1] == 200][: args.engine_slices])
    if args.store is None or not queries or not ok.any() or args.engine_slices == 0:
        why = ("give --store" if args.store is None else
               "--engine-slices 0" if args.engine_slices == 0 else "no planes")
        print(f"engine only: not measured ({why})")
        print("ratio: server/engine slices per s = nan")
    else:
        last, median, ready = engine_rate(args.store, nranks, queries, args.engine_seconds)
        rate = float(np.mean([f[0] for f in first] + [last]))
        runs = (f"{first[0][0]:.1f} before the server, {last:.1f} after it ({median:.1f} by its "
                f"median slice)" if first else f"{last:.1f} ({median:.1f} by the median slice)")
        print(f"engine only, the same {len(queries)} planes at {nranks} ranks, warm, one at a "
              f"time: {rate:.1f} slices/s; {runs}; load average {os.getloadavg()[0]:.1f}")
        # each rank's seconds to its parts ready, the mean of the engine's runs
        ready_s = np.mean([f[1] for f in first] + [ready], axis=0)
        print("engine, each rank's time to its parts ready (split, reads, extraction), ms per "
              "slice: " + ", ".join(f"rank {r} {1e3 * t:.2f}" for r, t in enumerate(ready_s)))
        if nranks > cores:  # the ranks' times to parts ready hold their waits for a core
            print(f"ceiling: not computed ({nranks} ranks on {cores} cores: a rank's time to "
                  "its parts ready is not its work)")
        elif http is not None and encoding is not None:
            work, client = float(ready_s.sum()), client_cpu / nok
            top = ceiling(cores, rate, work, http + client + encoding / 1e3)
            print(f"ceiling on {cores} cores: {cores} / (the engine's work {1e3 * work:.2f} ms "
                  f"per slice, its ranks' time to parts ready, the root's merge not counted, + "
                  f"HTTP {1e3 * http:.2f} ms, rank 0's main thread, + the client "
                  f"{1e3 * client:.2f} ms + {args.format} encoding {encoding:.2f} ms, an "
                  f"answered slice encoded again) / the engine's {rate:.1f} slices/s = "
                  f"{top:.3f} (a server with no cost of its own and no core ever idle)")
        print(f"compared: the server's answered {args.format} slices/s (HTTP, merge and "
              "encoding included) against the engine's slices/s over its timed passes"
              f"{' (the mean of its runs before and after the server)' if first else ''}")
        print(f"ratio: server/engine slices per s = {served / rate:.3f}")
    print(f"errors: {errors}")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
