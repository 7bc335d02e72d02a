"""``parvox filter --memory SIZE`` (issue 26 part 5): streamed slab by slab, the file written
equals the one written in memory bit for bit; unbounded operations and bad budgets are refused
in one line naming ``--memory``, exit code 2, nothing written."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.io import write_image
from parvox.ndimage.stream import slab_bytes
from parvox.testing import mpi_test

RNG = np.random.default_rng(265)
VOLUME = RNG.random((19, 12, 11)).astype(np.float32)
IMAGE = RNG.integers(0, 60000, (37, 15)).astype(np.uint16)
MASK = ndi.gaussian_filter(RNG.random((17, 10, 13)), 1.5) > 0.5

#: (input, output, CLI arguments): each run with and without --memory
CASES = [
    (VOLUME, "g.zarr", ["--op", "gaussian", "--sigma", "1.5", "--mode", "wrap"]),
    (VOLUME, "gl.npy", ["--op", "gaussian_laplace", "--sigma", "1"]),
    (IMAGE, "m.tif", ["--op", "median", "--size", "5"]),  # 2-D
    (IMAGE, "u.npy", ["--op", "uniform", "--size", "4", "--mode", "wrap"]),  # integer sums
    (MASK, "b.npy", ["--op", "binary_closing", "--iterations", "2"]),
    (VOLUME, "d.ome.zarr", ["--op", "grey_dilation", "--size", "3", "--iterations", "2"]),
]


@mpi_test(ranks=(2,), timeout=180)
def test_streamed_output_equals_the_in_memory_output() -> None:
    from mpi4py import MPI

    from parvox.cli import main
    from parvox.io import read

    world = MPI.COMM_WORLD
    tmp = Path(world.bcast(tempfile.mkdtemp(prefix="parvox-fm-") if world.rank == 0 else None))
    for i, (array, out, args) in enumerate(CASES):
        src = tmp / f"in{i}.npy"
        if world.rank == 0:
            np.save(src, array)
        world.Barrier()
        assert main(["filter", str(src), str(tmp / f"mem-{out}"), *args]) == 0
        budget = slab_bytes(2, array.shape, array.dtype, array.dtype, array.dtype, 6)  # a few planes
        assert main(["filter", str(src), str(tmp / f"str-{out}"), *args, "--memory", str(budget),
                     "--no-progress"]) == 0
        want, got = read(tmp / f"mem-{out}").allgather(), read(tmp / f"str-{out}").allgather()
        assert got.dtype == want.dtype and np.array_equal(got, want), (args, out)
    # found too small once running: one line, exit 2, nothing written
    assert main(["filter", str(tmp / "in0.npy"), str(tmp / "small.npy"), *CASES[0][2],
                 "--memory", "2KiB"]) == 2
    world.Barrier()
    assert not (tmp / "small.npy").exists()
    world.Barrier()
    if world.rank == 0:
        shutil.rmtree(tmp)


#: (input kind, CLI arguments after IN OUT, words in the error)
BAD = [
    ("mask", ["--op", "distance"], "unbounded"),
    ("mask", ["--op", "binary_fill_holes"], "unbounded"),
    ("mask", ["--op", "binary_erosion", "--iterations", "0"], "until nothing changes"),
    ("volume", ["--op", "uniform"], "running window sum"),  # float32
    ("volume", ["--op", "gaussian", "--memory", "0"], "expected a size"),
    ("volume", ["--op", "gaussian", "--memory=-1GiB"], "expected a size"),
    ("volume", ["--op", "gaussian", "--memory", "abc"], "expected a size"),
    ("png", ["--op", "median"], "PNG"),
]


@pytest.mark.parametrize(("kind", "argv", "words"), BAD)
def test_refused_in_one_line_naming_memory(tmp_path, capsys, kind, argv, words):
    from parvox.cli import main

    src, out = tmp_path / "in.npy", tmp_path / "out.npy"
    if kind == "mask":
        np.save(src, MASK)
    elif kind == "png":
        src = tmp_path / "in.png"
        write_image(src, IMAGE.astype(np.uint8))
    else:
        np.save(src, VOLUME)
    if not any(a.startswith("--memory") for a in argv):
        argv = [*argv, "--memory", "1GiB"]
    with pytest.raises(SystemExit) as info:
        main(["filter", str(src), str(out), *argv])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "argument --memory" in lines[0] and words in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]
