"""Seed 002 reproduced: the slice server's throughput against servers x disks, cache and zoom.

The shape of the seed's section 5 (Figs. 11-14) on the slice server's dataflow
(:class:`parvox.server.engine.SliceService`), scaled to this machine:

* one client rank (rank 0: splits, merges; no disks) and ``S`` server ranks (``--servers``,
  default 1,2), each serving ``D`` disks (``--disks``, default 1,2,4): the phantom is striped
  over ``S x D`` disks (eq. 1), disk ``d`` served by rank ``1 + d mod S``;
* every disk's bandwidth emulated (``--disk-mbps``, default 20 MB/s:
  :attr:`parvox.volume.ExtentReader.disk_mbps`): each disk serves its reads one after the
  other at that rate, the disks at once -- the seed's 1.88 MB/s SCSI disks, scaled to this
  machine's slices;
* successive slices orthogonal to the main diagonal, one voxel apart (the seed's browsing),
  submitted together, the extent cache off or on (``cache_mib`` per server), zoom 1 and 2;
* the bottleneck analysis's utilisation table: CPU of the client and of the servers, disk
  utilisation (bytes read over what the emulated disks could deliver in the run), messages per
  slice;
* the Fig. 7 variant (rank 0 splits the request into extent batches, today's design) against
  the Fig. 10 variant (each server gets the whole request and finds its own extents:
  ``ServerOptions(split="whole")``, :mod:`parvox.server.split`), both on the dataflow; and
  tokens per message (the seed's ``SendMessage`` coalescing), batch 128 and 16, coalescing
  off and on.

Writes ``bench/results/seed002.md`` and ``seed002_*.png`` with the seed's published figures
beside parvox's.

Usage::

    python bench/seeds/seed002.py --quick
    python bench/seeds/seed002.py --servers 1,2,4 --disks 1,2,4,8 --oversubscribe
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import (
    RESULTS,
    Report,
    common_args,
    cores,
    machine_line,
    parse_ranks,
    phantom_store,
    plt,
    progress,
    run_part,
    save_figure,
    write_json,
)

HERE = Path(__file__).resolve()
SEED = {
    "fig11": "zoom 1, no cache: disks are the bottleneck up to 12 disks per server; 5 servers "
             "x 12 disks (60) gave 4.8 slices/s, 104 MB/s aggregate, 1.74 MB/s per disk "
             "(1.88 MB/s measured alone); each group of 3 disks added ~5.2 MB/s, ~20 % server "
             "CPU, ~4 % client CPU and ~0.24 slices/s; a server saturates at 15 disks (1.2 "
             "slices/s), the client at 5 servers x 15 disks (6 slices/s)",
    "fig12": "zoom 1, 25 MB cache per server: the servers' CPU is the bottleneck up to 3 "
             "servers, 97.9 % of extents come from the cache; one server with one disk "
             "sustains 1.5 slices/s; the client's Fast Ethernet saturates at 5.3 slices/s "
             "(8.6 MB/s)",
    "fig13": "zoom 2, no cache: 1,615 extents (80 MB) per 512x512 slice, disk-bound in every "
             "configuration; 5 servers x 60 disks 1.3 slices/s, 105 MB/s; 246 % server CPU and "
             "38 % client CPU per slice/s; a server saturates at 18 disks (0.39 slices/s)",
    "fig14": "zoom 2, cache: up to 3 slices/s with 5 servers (240 MB/s); the cache helps only "
             "from 2 servers (one thrashes); client CPU 26 % per slice/s against 38 % without "
             "the cache, thanks to SendMessage coalescing several tokens per TCP/IP packet",
    "tokens": "Fig. 7: 437 extent reading requests per slice sent by the client, 2,098 per "
              "second at 4.8 slices/s; Fig. 10: one 120-byte request per server per slice",
}


def planes(shape: tuple[int, int, int], n: int, size: int, zoom: int) -> list[Any]:
    """``n`` successive slices orthogonal to the main diagonal, one voxel apart, centred."""
    from parvox.slicing import Plane

    diag = np.asarray(shape, dtype=float) - 1
    unit = diag / np.linalg.norm(diag)
    return [Plane.from_normal(center=diag / 2 + (k - (n - 1) / 2) * unit, normal=diag,
                              size=(size, size), zoom=zoom) for k in range(n)]


# -- the MPI worker ----------------------------------------------------------------------------
def worker(args: argparse.Namespace) -> None:
    """At 1 + S ranks: every (disks per server, variant, cache, zoom) cell asked for."""
    from mpi4py import MPI

    from parvox.server.engine import SliceService
    from parvox.server.options import ServerOptions
    from parvox.volume import DiskMap

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    servers = size - 1
    rows = []
    for cell in args.cells.split(";"):
        d, variant, cache, zoom = cell.split(":")
        d, zoom = int(d), int(zoom)
        store = Path(args.data) / f"store-{servers * d}"
        disk_map = DiskMap(tuple(1 + k % servers for k in range(servers * d)), size)
        batch, coalesce = 128, 1
        if variant.startswith("fig7"):  # fig7, fig7/b16, fig7/b16/c8
            for part in variant.split("/")[1:]:
                if part[0] == "b":
                    batch = int(part[1:])
                if part[0] == "c":
                    coalesce = int(part[1:])
        opts = ServerOptions(cache_bytes=(args.cache_mib << 20) if cache == "on" else 0,
                             batch=batch, coalesce=coalesce, encode_threads=1,
                             split="whole" if variant == "fig10" else "batches")
        with SliceService(store, opts, comm=comm, disk_map=disk_map) as svc:
            reader = svc.source.reader
            reader.disk_mbps = args.disk_mbps
            shape = tuple(svc.source.meta.shape)
            ps = planes(shape, args.nslices, args.size, zoom)  # type: ignore[arg-type]
            if rank == 0:
                svc.extract(planes(shape, 1, 32, zoom)[0])  # load kernels, untimed
            comm.Barrier()
            reader.clear()
            s0 = (reader.stats.bytes_read, reader.stats.misses, reader.stats.hits,
                  svc.flow.messages_sent, svc.flow.mpi_sends)
            comm.Barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            if rank == 0:
                for f in [svc.submit(p) for p in ps]:
                    f.result()
            comm.Barrier()
            wall = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
            cpu = time.process_time() - c0
            s1 = (reader.stats.bytes_read, reader.stats.misses, reader.stats.hits,
                  svc.flow.messages_sent, svc.flow.mpi_sends)
            mine = [b - a for a, b in zip(s0, s1, strict=True)]
            per_rank = comm.gather([cpu, *mine], root=0)
        if rank == 0:
            assert per_rank is not None
            print(f"  {cell}: {wall:.2f} s", file=sys.stderr, flush=True)
            srv = np.array(per_rank[1:], dtype=float)
            n = args.nslices
            rows.append({
                "servers": servers, "disks": d, "variant": variant, "cache": cache,
                "zoom": zoom, "slices_s": n / wall, "wall": wall,
                "extents_per_slice": float(srv[:, 2].sum() + srv[:, 3].sum()) / n,
                "MB_read_s": float(srv[:, 1].sum()) / wall / 1e6,
                "hit_pct": 100 * float(srv[:, 3].sum()) / max(float(srv[:, 2:4].sum()), 1),
                "client_cpu_pct": 100 * per_rank[0][0] / wall,
                "server_cpu_pct": 100 * float(srv[:, 0].mean()) / wall,
                "disk_util_pct": 100 * float(srv[:, 1].sum()) / (
                    servers * d * args.disk_mbps * 1e6 * wall),
                "client_msgs_per_slice": per_rank[0][4] / n,
                "client_mpi_sends_per_slice": per_rank[0][5] / n,
                "server_msgs_per_slice": float(srv[:, 4].sum()) / n,
                "server_mpi_sends_per_slice": float(srv[:, 5].sum()) / n,
            })  # fmt: skip
    if rank == 0:
        write_json(args.report, {"rows": rows})


# -- the driver --------------------------------------------------------------------------------
def build_stores(data: Path, shape: tuple[int, int, int], counts: list[int]) -> None:
    """The RGB phantom striped over each disk count (made once, kept under bench/results)."""
    for n in counts:
        phantom_store(data / f"store-{n}", shape, n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(parser, "unused")
    parser.add_argument("--servers", default="1,2", help="server counts S (ranks: 1 + S)")
    parser.add_argument("--disks", default="1,2,4", help="disks per server D")
    parser.add_argument("--disk-mbps", type=float, default=20.0,
                        help="emulated bandwidth of each disk, MB/s (default 20)")
    parser.add_argument("--cache-mib", type=int, default=64,
                        help="extent cache per server when on, MiB (default 64)")
    parser.add_argument("--size", type=int, default=None, help="slice side (default 256)")
    parser.add_argument("--nslices", type=int, default=None, help="slices per cell")
    parser.add_argument("--cells", default="", help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    if args.disk_mbps <= 0:
        parser.error(f"argument --disk-mbps: must be > 0, got {args.disk_mbps}")
    t_start = time.perf_counter()
    line = machine_line()
    servers = parse_ranks(args.servers)
    disks = parse_ranks(args.disks)
    size = args.size or (192 if args.quick else 384)
    nslices = args.nslices or (4 if args.quick else 12)
    shape = (136, 256, 256) if args.quick else (272, 512, 512)
    data = RESULTS / "seed002" / ("quick" if args.quick else "full")
    if not args.oversubscribe:
        over = [s for s in servers if s + 1 > cores() + 1]
        if over:
            progress(f"seed 002: skipping {over} servers: more than {cores() + 1} ranks on "
                     f"{cores()} cores (the servers mostly wait on the emulated disks, so one "
                     "rank over the core count is allowed; --oversubscribe for more)")
        servers = [s for s in servers if s not in over]
    build_stores(data, shape, sorted({s * d for s in servers for d in disks}))
    s_max, d_max = max(servers), max(disks)
    rows: list[dict[str, Any]] = []
    common = ["--worker", "cells", "--data", str(data), "--disk-mbps", str(args.disk_mbps),
              "--cache-mib", str(args.cache_mib), "--size", str(size), "--nslices",
              str(nslices)]
    for s in servers:
        cells = [f"{d}:fig7:{c}:{z}" for d in disks for c in ("off", "on") for z in (1, 2)]
        if s == s_max:  # the variants and the tokens at the largest configuration
            cells += [f"{d_max}:{v}:{c}:1" for v in ("fig10", "fig7/b16", "fig7/b16/c8")
                      for c in ("off", "on")]
        progress(f"seed 002: {s} server(s) + 1 client, {len(cells)} cells")
        rows += run_part(HERE, s + 1, [*common, "--cells", ";".join(cells)])["rows"]
    out: Path = args.out
    rep = Report(
        "Seed 002 reproduced: the slice server against servers x disks, cache and zoom",
        f"`python bench/seeds/seed002.py{' --quick' if args.quick else ''}` on {line}. The "
        f"RGB phantom {shape[2]}x{shape[1]}x{shape[0]} in 17x32x32 extents (52 KB, the seed's "
        f"51 KB), striped over S x D disks by eq. 1; {nslices} successive {size}x{size} slices "
        "orthogonal to the main diagonal, one voxel apart, submitted together; rank 0 is the "
        "client (split, merge; no disks), ranks 1..S the servers. Each disk is emulated at "
        f"{args.disk_mbps:g} MB/s (`ExtentReader.disk_mbps`; the seed's disks: 1.88 MB/s for "
        f"51 KB extents); cache 'on' is {args.cache_mib} MiB per server. The seed ran 5 "
        "Bi-Pentium Pro servers with up to 12 disks each and a client PC on Fast Ethernet, "
        "512x512 slices of the 13 GB Visible Human; this machine has "
        f"{cores()} cores, so S is {servers} and the figures are its own scale.")
    _grid(rep, rows, servers, disks, out)
    _util(rep, rows)
    _variants(rep, rows)
    rep.footer(t_start)
    rep.write(out / "seed002.md")
    return 0


def _grid(rep: Report, rows: list[dict[str, Any]], servers: list[int], disks: list[int],
          out: Path) -> None:
    rep.section("Figs. 11-14: slices per second against servers x disks per server")
    grid = [r for r in rows if r["variant"] == "fig7"]
    rep.table(["zoom", "cache", "servers", "disks/server", "slices/s", "extents/slice",
               "MB/s read", "cache hits %"],
              [[r["zoom"], r["cache"], r["servers"], r["disks"], r["slices_s"],
                r["extents_per_slice"], r["MB_read_s"], r["hit_pct"]] for r in grid])
    for key in ("fig11", "fig12", "fig13", "fig14"):
        rep.para(f"The seed, {key.replace('fig', 'Fig. ')}: {SEED[key]}.")
    fig, axes = plt().subplots(1, 4, figsize=(16, 3.6), sharey=False)
    for ax, (zoom, cache, title) in zip(axes, ((1, "off", "Fig. 11: zoom 1, no cache"),
                                               (1, "on", "Fig. 12: zoom 1, cache"),
                                               (2, "off", "Fig. 13: zoom 2, no cache"),
                                               (2, "on", "Fig. 14: zoom 2, cache")),
                                        strict=True):
        for s in servers:
            xs = [r for r in grid if r["servers"] == s and r["zoom"] == zoom
                  and r["cache"] == cache]
            ax.plot([r["disks"] for r in xs], [r["slices_s"] for r in xs], "o-",
                    label=f"{s} server(s)")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("disks per server")
        ax.set_xticks(disks)
    axes[0].set_ylabel("slices/s")
    axes[0].legend(fontsize=8)
    save_figure(fig, out / "seed002_figs11_14.png")
    rep.figure(out / "seed002_figs11_14.png", "slices per second against servers x disks")


def _util(rep: Report, rows: list[dict[str, Any]]) -> None:
    rep.section("Bottleneck analysis: utilisation per stage")
    grid = [r for r in rows if r["variant"] == "fig7"]
    rep.table(["zoom", "cache", "S", "D", "slices/s", "client CPU %", "server CPU % (mean)",
               "disk utilisation %", "client msgs/slice", "server msgs/slice",
               "client CPU % per slice/s", "server CPU % per slice/s"],
              [[r["zoom"], r["cache"], r["servers"], r["disks"], r["slices_s"],
                r["client_cpu_pct"], r["server_cpu_pct"], r["disk_util_pct"],
                r["client_msgs_per_slice"], r["server_msgs_per_slice"],
                r["client_cpu_pct"] / r["slices_s"], r["server_cpu_pct"] / r["slices_s"]]
               for r in grid])
    rep.para("CPU % is the process's CPU time over the wall time of the run (100 % = one "
             "core); disk utilisation is the bytes the servers read from their files over "
             "what their emulated disks could deliver in the run (100 %: disk-bound). "
             "Messages are dataflow messages (tokens, results, control). The seed's analysis: "
             "per slice/s, 83 % server CPU and 17 % client CPU at zoom 1, 246 % and 38 % at "
             "zoom 2; disks at 1.74 of 1.88 MB/s (93 %) with 60 disks, zoom 1, no cache.")


def _variants(rep: Report, rows: list[dict[str, Any]]) -> None:
    rep.section("Fig. 7 against Fig. 10, and tokens per message")
    var = [r for r in rows if r["variant"] != "fig7" or (
        r["servers"] == max(x["servers"] for x in rows) and r["zoom"] == 1
        and r["disks"] == max(x["disks"] for x in rows))]
    names = {"fig7": "Fig. 7: rank 0 splits into batches of 128 extents",
             "fig7/b16": "Fig. 7, batches of 16 extents",
             "fig7/b16/c8": "Fig. 7, batches of 16, coalescing up to 8 per message",
             "fig10": "Fig. 10: each server gets the whole request"}
    rep.table(["variant", "cache", "slices/s", "client CPU %", "client msgs/slice",
               "client MPI sends/slice", "tokens per message (client)",
               "server msgs/slice", "server MPI sends/slice"],
              [[names[r["variant"]], r["cache"], r["slices_s"], r["client_cpu_pct"],
                r["client_msgs_per_slice"], r["client_mpi_sends_per_slice"],
                r["client_msgs_per_slice"] / max(r["client_mpi_sends_per_slice"], 1e-9),
                r["server_msgs_per_slice"], r["server_mpi_sends_per_slice"]] for r in var])
    rep.para(f"The seed: {SEED['tokens']}. Fig. 10 is `SliceService` with "
             "`ServerOptions(split=\"whole\")` (`parvox serve --split whole`, "
             "`parvox.server.split`): a split that sends one token per server and a read stage "
             "that cuts the plane into the server's own extents (its read and extraction of "
             "one slice are one token, so they do not overlap each other within a server; "
             "Fig. 7's batches do). Tokens per message: dataflow messages over MPI sends "
             "(`Dataflow(coalesce=N)` packs several into one send, as the seed's SendMessage "
             "packs tokens into a TCP/IP packet). With batches of 128 extents a slice that cuts "
             "fewer than 128 extents per server is already one token per server in Fig. 7, "
             "as in Fig. 10; batches of 16 (the seed's one request per extent, scaled) show "
             "what the client pays per token.")


if __name__ == "__main__":
    sys.exit(main())
