"""Benchmark: oblique slices from a striped store (parvox) vs Zarr v3 + scipy (the peer).

As in the seed's section 5: 512x512 slices orthogonal to the volume's main diagonal, stepping
along it, zoom 1 and 2, 1 and 2 ranks, in three cases (:data:`CASES`):

- ``cold`` (seed 5.1): slices far apart along the diagonal (30% to 70% of it); before each
  slice the files are dropped from the page cache (``posix_fadvise(DONTNEED)``) and the
  per-rank extent cache is off;
- ``page``: the same slices with the files in the page cache, extent cache off;
- ``warm`` (seed 5.2, a user browsing): successive slices one voxel apart, after a first pass
  over them, extent cache on.

The volume is the RGB phantom (``parvox.volume.Phantom``), at least 2 GiB (``--quick``: about
256 MiB). The peer stores the same volume as a Zarr v3 array with the same chunk shape, reads
the chunks of each plane's bounding box and resamples with
``scipy.ndimage.map_coordinates(order=1)``. The raw cold read bandwidth of the store's files is
measured before and after each parvox run, two ways: large sequential reads, and a plain read of
the very slots the slices need (no checksum, no extraction). Then, at 1 rank and
zoom 1, the cold and warm cases on the same phantom stored with each codec (``none``, ``zstd``,
``blosc2``: slices/s and bytes read from the files per slice), and the pyramid table: extents
read per slice at sample steps 1, 2, 4 and 8 mm reading level 0 only or the level
``level="auto"`` picks (with page-cache times). Prints the tables, saves
``bench/results/slicing.{json,png}`` and ends with the ``engine:`` line (warm zoom-1 slices/s
at the most ranks run; issue 29's target: >= 100 at 2 ranks) and ``ratio: parvox/zarr+scipy =
X`` (time per slice, warm, zoom 1, 1 rank). Times per slice are the median slice's.

Usage::

    python bench/slicing.py --quick
    python bench/slicing.py            # >= 2 GiB volume, slow
    python bench/slicing.py --quick --engine-only --cases warm --zooms 1 --nslices 48
    python bench/slicing.py --quick --engine-only --cases warm --zooms 1 --ranks 1 \
        --compute-threads 2            # 1 rank x 2 kernel threads
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SIZE = (512, 512)


def volume_shape(quick: bool) -> tuple[int, int, int]:
    """RGB phantom shapes: ~256 MiB (quick) or ~2.1 GiB, Visible-Human-like proportions."""
    return (320, 416, 672) if quick else (640, 832, 1376)


def planes(shape: tuple[int, int, int], nslices: int, zoom: int) -> list:
    """Slices orthogonal to the main diagonal, centred on it from 30% to 70% of its length.

    Far apart: each cuts other extents than the last (the seed's section 5.1 cold case).
    """
    from parvox.slicing import Plane

    diag = np.asarray(shape, dtype=float) - 1
    ts = np.linspace(0.3, 0.7, nslices)
    return [Plane.from_normal(center=t * diag, normal=diag, size=SIZE, zoom=zoom) for t in ts]


def browse_planes(shape: tuple[int, int, int], nslices: int, zoom: int) -> list:
    """Successive slices orthogonal to the main diagonal, one voxel apart, around its middle.

    A user browsing through the volume (the seed's section 5.2): most extents of a slice were
    read for the previous one.
    """
    from parvox.slicing import Plane

    diag = np.asarray(shape, dtype=float) - 1
    unit = diag / np.linalg.norm(diag)
    steps = np.arange(nslices) - (nslices - 1) / 2
    return [Plane.from_normal(center=diag / 2 + k * unit, normal=diag, size=SIZE, zoom=zoom)
            for k in steps]


#: The three cases measured: which slices, whether the files are dropped from the page cache
#: before each slice, whether the per-rank LRU extent cache is on.
CASES = {
    "cold": (planes, True, False),  # seed 5.1: far-apart slices, nothing cached
    "page": (planes, False, False),  # the same slices, the files in the OS page cache
    "warm": (browse_planes, False, True),  # seed 5.2: browsing, page cache and LRU warm
}


# -- data ------------------------------------------------------------------------------------
def build_store(workdir: Path, shape: tuple[int, int, int], ndisks: int) -> Path:
    """Create (once) the parvox store of the RGB phantom (``bench/serve_load.py`` loads it too)."""
    from parvox.volume import Phantom, VolumeStore, ingest

    store = workdir / "store"
    try:
        ok = VolumeStore(store).meta.shape == shape
    except Exception:
        ok = False
    if not ok:
        print(f"building the parvox store {store} ({shape} RGB, {ndisks} disks) ...")
        workdir.mkdir(parents=True, exist_ok=True)
        ingest(Phantom(shape, rgb=True), store, ndisks=ndisks, overwrite=True, progress=True)
    return store


def build(workdir: Path, shape: tuple[int, int, int], ndisks: int) -> tuple[Path, Path]:
    """Create (once) the parvox store and the Zarr v3 array of the phantom."""
    import zarr
    from tqdm import tqdm

    from parvox.volume import Phantom

    store, zpath = build_store(workdir, shape, ndisks), workdir / "peer.zarr"
    src = Phantom(shape, rgb=True)
    done = zpath / ".complete"
    if not done.exists():
        print(f"building the Zarr v3 array {zpath} (chunks 17x32x32x3, no compression) ...")
        arr = zarr.create_array(
            str(zpath), shape=(*shape, 3), chunks=(17, 32, 32, 3), dtype="uint8",
            compressors=None, overwrite=True,
        )  # fmt: skip
        step = 17 * 4
        for z0 in tqdm(range(0, shape[0], step), desc="zarr", leave=False):
            z1 = min(z0 + step, shape[0])
            arr[z0:z1] = src.read_slab(z0, z1)
        done.touch()
    return store, zpath


def build_codec_store(workdir: Path, shape: tuple[int, int, int], ndisks: int,
                      codec: str) -> Path:
    """Create (once) the phantom's store with compressed extents."""
    from parvox.volume import Phantom, VolumeStore, ingest

    store = workdir / f"store-{codec}"
    try:
        ok = VolumeStore(store).meta.shape == shape
    except Exception:
        ok = False
    if not ok:
        print(f"building the {codec} store {store} ...")
        ingest(Phantom(shape, rgb=True), store, ndisks=ndisks, codec=codec, overwrite=True)
    return store


def ensure_pyramid(store: Path, levels: int) -> None:
    """Give the parvox store pyramid levels 1..``levels`` (once)."""
    from parvox.volume import VolumeStore
    from parvox.volume.pyramid import build_pyramid

    if VolumeStore(store).manifest.nlevels < levels + 1:
        print(f"building pyramid levels 1..{levels} of {store} ...")
        build_pyramid(store, levels)


#: sample steps (mm, voxels of the phantom) of the pyramid table
STEPS = (1, 2, 4, 8)


def pyramid_table(store: Path, shape, nslices: int) -> list[dict]:
    """Extents read per 512x512 slice (and page-cache time, 1 rank) at each step of
    :data:`STEPS`, reading level 0 only or the level ``level="auto"`` picks."""
    from mpi4py import MPI

    from parvox.slicing import Plane, SliceEngine, cut_extents
    from parvox.slicing.levels import auto_level, plane_at_level
    from parvox.volume import VolumeStore

    top = VolumeStore(store).manifest
    layouts = {k: top.at_level(k).layout for k in range(top.nlevels)}
    rows = []
    diag = np.asarray(shape, dtype=float) - 1
    with SliceEngine(store, comm=MPI.COMM_SELF, cache_bytes=0) as eng:
        for step in STEPS:
            ps = [Plane.from_normal(center=t * diag, normal=diag, size=SIZE, step=float(step))
                  for t in np.linspace(0.3, 0.7, nslices)]
            row: dict = {"step": step, "level": auto_level(top.spacing, step, top.nlevels)}
            for name, level in (("level0", 0), ("pyramid", row["level"])):
                row[f"{name}_extents"] = float(np.mean(
                    [len(cut_extents(plane_at_level(p, level), layouts[level])) for p in ps]))
                for p in ps:  # page cache warm, kernels compiled
                    eng.extract(p, level=level)
                t0 = time.perf_counter()
                for p in ps:
                    eng.extract(p, level=level)
                row[f"{name}_ms"] = 1000 * (time.perf_counter() - t0) / len(ps)
            rows.append(row)
    return rows


def drop_files(paths: list[str]) -> None:
    """Evict files from the page cache."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def raw_bandwidth(files: list[str], limit: int) -> float:
    """Cold sequential read bandwidth (MB/s) of ``files``, up to ``limit`` bytes."""
    drop_files(files)
    buf = bytearray(8 << 20)
    total = 0
    t0 = time.perf_counter()
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            off = 0
            while total < limit:
                n = os.preadv(fd, [buf], off)
                if n <= 0:
                    break
                off += n
                total += n
        finally:
            os.close(fd)
        if total >= limit:
            break
    return total / (time.perf_counter() - t0) / 1e6


def raw_extent_bandwidth(store: Path, shape, nslices: int) -> float:
    """Cold read bandwidth (MB/s) of the very slots the zoom-1 slices need, read plainly.

    The seed's "effective throughput" of a disk for extent-sized blocks at random places: per
    slice, the files are dropped from the page cache, every slot the plane cuts is announced
    (``POSIX_FADV_WILLNEED``) and read with one ``preadv`` into one buffer, in one thread, with
    no checksum, no cache and no extraction.
    """
    from parvox.slicing import extents_on_disks
    from parvox.volume import VolumeStore

    st = VolumeStore(store)
    disks, size = range(st.meta.ndisks), st.meta.slot_bytes
    files = [st.file_path(d) for d in disks]
    buf = bytearray(size)
    total, seconds = 0, 0.0
    with st:
        for disk in disks:
            os.posix_fadvise(st.fd(disk), 0, 0, os.POSIX_FADV_RANDOM)
        for p in planes(shape, nslices, 1):
            keys = extents_on_disks(p, st.layout, disks)  # sorted by (disk, slot)
            where = [(st.fd(d), off) for d, off in (st.locate(*k) for k in keys.tolist())]
            drop_files(files)
            t0 = time.perf_counter()
            for fd, off in where:
                os.posix_fadvise(fd, off, size, os.POSIX_FADV_WILLNEED)
            for fd, off in where:
                total += os.preadv(fd, [buf], off)
            seconds += time.perf_counter() - t0
    return total / seconds / 1e6


# -- peer ------------------------------------------------------------------------------------
def peer_slice(arr, plane) -> np.ndarray:
    """Read the chunks of the plane's bounding box from Zarr, resample with scipy."""
    from scipy.ndimage import map_coordinates

    coords = plane.sample_grid()
    shape = np.asarray(arr.shape[:3])
    lo = np.clip(np.floor(coords.reshape(3, -1).min(axis=1)), 0, shape - 1).astype(int)
    hi = np.clip(np.ceil(coords.reshape(3, -1).max(axis=1)) + 1, 1, shape).astype(int)
    box = arr[lo[0] : hi[0], lo[1] : hi[1], lo[2] : hi[2]]
    local = coords - lo[:, None, None]
    h, w = plane.size
    z = plane.zoom
    out = np.empty((h, w, 3), dtype=np.float64)
    for c in range(3):
        s = map_coordinates(box[..., c], local, order=1, mode="constant", cval=0.0,
                            output=np.float64)
        out[..., c] = s.reshape(h, z, w, z).mean(axis=(1, 3))
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def run_peer(zpath: Path, shape, nslices: int, results: list, check_store: Path) -> None:
    import zarr
    from tqdm import tqdm

    from parvox.slicing import SliceEngine

    arr = zarr.open_array(str(zpath), mode="r")
    files = [str(p) for p in zpath.rglob("*") if p.is_file()]
    nbytes = sum(os.path.getsize(f) for f in files)
    for zoom in (1, 2):
        # correctness: the peer and parvox agree (off by at most 1 from rounding)
        from mpi4py import MPI

        first = planes(shape, 1, zoom)[0]
        with SliceEngine(check_store, comm=MPI.COMM_SELF) as eng:
            a, b = peer_slice(arr, first), eng.extract(first)
        diff = int(np.abs(a.astype(int) - b.astype(int)).max())
        for cache in ("cold", "warm"):
            series, drop, _ = CASES[cache]
            ps = series(shape, nslices, zoom)
            if drop:
                drop_files(files)
            else:
                for p in ps:  # warm the page cache with one pass
                    peer_slice(arr, p)
            t0 = time.perf_counter()
            read = 0
            for p in tqdm(ps, desc=f"zarr+scipy zoom {zoom} {cache}", leave=False):
                if drop:
                    drop_files(files)
                coords = p.sample_grid().reshape(3, -1)
                lo = np.clip(np.floor(coords.min(axis=1)), 0, np.asarray(shape) - 1)
                hi = np.clip(np.ceil(coords.max(axis=1)) + 1, 1, shape)
                read += int(np.prod(hi - lo)) * 3
                peer_slice(arr, p)
            dt = (time.perf_counter() - t0) / len(ps)
            results.append({
                "system": "zarr+scipy", "ranks": 1, "zoom": zoom, "cache": cache,
                "s_per_slice": dt, "slices_per_s": 1 / dt, "extents_per_slice": None,
                "MB_per_s": read / len(ps) / dt / 1e6, "max_diff_vs_parvox": diff,
                "store_bytes": nbytes,
            })  # fmt: skip


# -- parvox (runs under mpiexec) -------------------------------------------------------------
def worker(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from parvox.slicing import SliceEngine

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    shape = tuple(args.shape)
    out = []
    zooms = [int(z) for z in args.zooms.split(",")]
    cases = {c: CASES[c] for c in args.cases.split(",")}
    with SliceEngine(args.store, threads=args.threads,
                     compute_threads=args.compute_threads) as eng:
        slot = eng.source.meta.slot_bytes
        for zoom in zooms:  # load the compiled kernels and start the threads, untimed
            eng.extract(planes(shape, 1, zoom)[0])
        for zoom in zooms:
            for cache, (series, drop, lru) in cases.items():
                ps = series(shape, args.nslices, zoom)
                reader = eng.source.reader
                reader.clear()
                reader.cache_bytes = args.cache_mib << 20 if lru else 0
                if not drop:
                    for p in ps:  # warm-up pass: page cache (and LRU)
                        eng.extract(p)
                before = reader.stats.bytes_read
                extents = 0
                cpu = 0.0
                times = []
                for p in ps:
                    if drop:  # every slice starts with none of its files cached
                        reader.drop_page_cache(eng.source.disks)
                    comm.Barrier()
                    t0, c0 = time.perf_counter(), time.process_time()
                    eng.extract(p)
                    cpu += time.process_time() - c0
                    comm.Barrier()
                    times.append(time.perf_counter() - t0)
                    extents += eng.stats.extents
                # the median slice: a shared machine's hiccups do not move it
                dt = float(np.median(times))
                cpu = comm.reduce(cpu / len(ps), op=MPI.MAX, root=0)
                read = comm.reduce(reader.stats.bytes_read - before, root=0)
                ext = comm.reduce(extents, root=0)
                if rank == 0:
                    out.append({
                        "system": "parvox", "ranks": comm.Get_size(), "zoom": zoom,
                        "cache": cache, "s_per_slice": dt, "slices_per_s": 1 / dt,
                        "extents_per_slice": ext / len(ps),
                        "MB_per_s": ext / len(ps) * slot / dt / 1e6,
                        "file_MB_per_s": read / len(ps) / dt / 1e6,
                        "file_bytes_per_slice": read / len(ps),
                        "cpu_s_per_slice": cpu, "codec": eng.source.meta.codec,
                    })  # fmt: skip
    if rank == 0:
        Path(args.result).write_text(json.dumps(out))


def run_parvox(store: Path, shape, nslices: int, ranks: int, threads: int, cache_mib: int,
               workdir: Path, compute_threads: int = 1, cases: str = "cold,page,warm",
               zooms: str = "1,2") -> list:
    from parvox.launch import launch_command

    result = workdir / f"parvox-{ranks}.json"
    argv = [str(Path(__file__).resolve()), "--worker", "--store", str(store), "--shape",
            *map(str, shape), "--nslices", str(nslices), "--threads", str(threads),
            "--cache-mib", str(cache_mib), "--result", str(result),
            "--compute-threads", str(compute_threads), "--cases", cases, "--zooms", zooms]
    print(f"parvox at {ranks} rank(s) on {store.name} ...")
    subprocess.run(launch_command(ranks, argv), check=True)
    return json.loads(result.read_text())


# -- report ----------------------------------------------------------------------------------
#: issue 29's engine target: warm 512x512 zoom-1 slices per second at 2 ranks
ENGINE_TARGET = 100.0


def engine_line(results: list) -> None:
    """Print the engine line: warm zoom-1 slices/s at the most ranks measured, and the target."""
    warm = [r for r in results if r["system"] == "parvox" and r["zoom"] == 1
            and r["cache"] == "warm"]
    if not warm:
        return
    best = max(warm, key=lambda r: r["ranks"])
    print(f"engine: warm {SIZE[0]}x{SIZE[1]} zoom-1 slices at {best['ranks']} rank(s): "
          f"{best['slices_per_s']:.1f} slices/s (median slice; target at 2 ranks: "
          f">= {ENGINE_TARGET:.0f})")


def report(results: list, raws: list[dict[str, float]], outdir: Path, machine: str,
           codecs: list | None = None, pyramid: list | None = None) -> None:
    head = (f"{'system':<11} {'ranks':>5} {'zoom':>4} {'cache':>5} {'slices/s':>9} "
            f"{'ms/slice':>9} {'cpu ms':>7} {'extents':>8} {'MB/s':>8} {'file MB/s':>9}")
    seq = [r["seq"] for r in raws]
    ext = [r["extents"] for r in raws]
    print(f"\nmachine: {machine}")
    print("raw cold reads of the store files, before and after each parvox run (MB/s): "
          f"sequential (8 MiB reads) {', '.join(f'{x:.0f}' for x in seq)}; "
          f"the slices' slots, plain {', '.join(f'{x:.0f}' for x in ext)}")
    print("cpu ms: CPU time per slice of the busiest parvox rank, its I/O threads included")
    print(head)
    print("-" * len(head))
    for r in results:
        ext = "" if r["extents_per_slice"] is None else f"{r['extents_per_slice']:.0f}"
        fmb = f"{r['file_MB_per_s']:.0f}" if "file_MB_per_s" in r else ""
        cpu = f"{1000 * r['cpu_s_per_slice']:.1f}" if "cpu_s_per_slice" in r else ""
        print(f"{r['system']:<11} {r['ranks']:>5} {r['zoom']:>4} {r['cache']:>5} "
              f"{r['slices_per_s']:>9.2f} {1000 * r['s_per_slice']:>9.1f} {cpu:>7} {ext:>8} "
              f"{r['MB_per_s']:>8.0f} {fmb:>9}")
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "slicing.json").write_text(json.dumps(
        {"machine": machine, "raw_MB_per_s": raws, "results": results, "codecs": codecs,
         "pyramid": pyramid}, indent=1))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(11, 4.5))
        labels = [f"{r['system']} {r['ranks']}r z{r['zoom']} {r['cache']}" for r in results]
        ax.bar(range(len(results)), [r["slices_per_s"] for r in results],
               color=["C0" if r["system"] == "parvox" else "C1" for r in results])
        ax.set_xticks(range(len(results)), labels, fontsize=7, rotation=45, ha="right")
        ax.set_ylabel("512x512 slices / s")
        ax.set_title("oblique slices orthogonal to the main diagonal")
        fig.tight_layout()
        fig.savefig(outdir / "slicing.png", dpi=120)
    except ImportError:
        pass
    if codecs:
        print("\ncodecs (1 rank, zoom 1): slices/s and bytes read from the files per slice")
        print(f"{'codec':<7} {'store MB':>9} {'cold/s':>7} {'cold MB/slice':>14} "
              f"{'warm/s':>7} {'warm MB/slice':>14}")
        for c in codecs:
            print(f"{c['codec']:<7} {c['store_bytes'] / 1e6:>9.0f} {c['cold']['slices_per_s']:>7.2f} "
                  f"{c['cold']['file_bytes_per_slice'] / 1e6:>14.2f} "
                  f"{c['warm']['slices_per_s']:>7.2f} {c['warm']['file_bytes_per_slice'] / 1e6:>14.2f}")
    if pyramid:
        print("\npyramid: extents read per 512x512 slice orthogonal to the diagonal "
              "(ms: page cache, 1 rank)")
        print(f"{'step':>4} {'level':>5} {'level 0':>8} {'ms':>7} {'pyramid':>8} {'ms':>7} "
              f"{'vs step 1':>9}")
        first = pyramid[0]["pyramid_extents"]
        for r in pyramid:
            print(f"{r['step']:>4} {r['level']:>5} {r['level0_extents']:>8.0f} "
                  f"{r['level0_ms']:>7.1f} {r['pyramid_extents']:>8.0f} {r['pyramid_ms']:>7.1f} "
                  f"{r['pyramid_extents'] / first:>9.2f}")
    px = next(r for r in results if r["system"] == "parvox" and r["ranks"] == 1
              and r["zoom"] == 1 and r["cache"] == "warm")
    peer = next(r for r in results if r["system"] == "zarr+scipy" and r["zoom"] == 1
                and r["cache"] == "warm")
    cold = [r for r in results if r["system"] == "parvox" and r["cache"] == "cold"]
    best = max(cold, key=lambda r: r["file_MB_per_s"] / r["raw_seq_MB_per_s"])
    print(f"parvox cold file read, best ({best['ranks']} rank(s), zoom {best['zoom']}): "
          f"{best['file_MB_per_s']:.0f} MB/s = "
          f"{100 * best['file_MB_per_s'] / best['raw_seq_MB_per_s']:.0f}% of the raw sequential "
          f"read ({best['raw_seq_MB_per_s']:.0f} MB/s), "
          f"{100 * best['file_MB_per_s'] / best['raw_extents_MB_per_s']:.0f}% of the plain read "
          f"of the same slots ({best['raw_extents_MB_per_s']:.0f} MB/s), both measured around it")
    engine_line(results)
    print(f"ratio: parvox/zarr+scipy = {px['s_per_slice'] / peer['s_per_slice']:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="~256 MiB volume, under a minute")
    ap.add_argument("--workdir", default=None, help="where the data live (kept for reuse)")
    ap.add_argument("--disks", type=int, default=4)
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--threads", type=int, default=1, help="I/O threads per rank")
    ap.add_argument("--cache-mib", type=int, default=256)
    ap.add_argument("--compute-threads", type=int, default=1,
                    help="extraction threads per rank")
    ap.add_argument("--nslices", type=int, default=None)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--shape", type=int, nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--cases", default="cold,page,warm",
                    help="the cases measured (e.g. warm: the engine target's alone)")
    ap.add_argument("--zooms", default="1,2", help="the zooms measured")
    ap.add_argument("--engine-only", action="store_true",
                    help="only the parvox runs: no raw reads, peer, codecs or pyramid")
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    import platform

    shape = volume_shape(args.quick)
    nslices = args.nslices or (6 if args.quick else 24)
    workdir = Path(args.workdir or f"/tmp/parvox-bench-slicing-{'quick' if args.quick else 'full'}")
    workdir.mkdir(parents=True, exist_ok=True)
    store, zpath = build(workdir, shape, args.disks)
    from parvox.volume import VolumeStore

    files = [VolumeStore(store).file_path(d) for d in range(args.disks)]

    def measure_raw() -> dict[str, float]:
        return {"seq": raw_bandwidth(files, limit=1 << 30),
                "extents": raw_extent_bandwidth(store, shape, nslices)}

    if args.engine_only:
        results = []
        for r in (int(x) for x in args.ranks.split(",")):
            results += run_parvox(store, shape, nslices, r, args.threads, args.cache_mib,
                                  workdir, args.compute_threads, args.cases, args.zooms)
        print(f"\nload {os.getloadavg()[0]:.1f}; s/slice: the median slice")
        for row in results:
            print(f"parvox {row['ranks']} rank(s) x {args.compute_threads} compute thread(s), "
                  f"zoom {row['zoom']}, {row['cache']}: {row['slices_per_s']:.1f} slices/s, "
                  f"cpu {1000 * row['cpu_s_per_slice']:.1f} ms/slice")
        engine_line(results)
        return
    # the file system's speed drifts (a VM's disk is the host's cache): raw reads bracket
    # every parvox run, and each run is compared with the mean of the two around it
    raws = [measure_raw()]
    results: list = []
    for r in (int(x) for x in args.ranks.split(",")):
        run = run_parvox(store, shape, nslices, r, args.threads, args.cache_mib, workdir,
                         args.compute_threads, args.cases, args.zooms)
        raws.append(measure_raw())
        for row in run:
            for kind in ("seq", "extents"):
                row[f"raw_{kind}_MB_per_s"] = (raws[-2][kind] + raws[-1][kind]) / 2
        results += run
    run_peer(zpath, shape, 2 if args.quick else 3, results, store)
    codecs = []
    for codec in ("none", "zstd", "blosc2"):
        cstore = store if codec == "none" else build_codec_store(workdir, shape, args.disks,
                                                                 codec)
        rows = run_parvox(cstore, shape, nslices, 1, args.threads, args.cache_mib, workdir,
                          args.compute_threads, cases="cold,warm", zooms="1")
        from parvox.volume import VolumeStore as _Store

        codecs.append({"codec": codec, "store_bytes": _Store(cstore).size_on_disk(),
                       **{r["cache"]: r for r in rows}})
    ensure_pyramid(store, 3)
    pyramid = pyramid_table(store, shape, nslices)
    load = os.getloadavg()[0]
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, load {load:.1f}, "
               f"Python {platform.python_version()}")
    report(results, raws, HERE / "results", machine, codecs, pyramid)


if __name__ == "__main__":
    main()
