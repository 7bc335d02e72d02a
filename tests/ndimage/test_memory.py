"""Memory estimates of the filters and the refusal of a filter that cannot fit (issue 27)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from parvox.errors import ParameterError
from parvox.io import read_image, write_image
from parvox.ndimage import _memory
from parvox.ndimage._histogram import extend
from parvox.ndimage._memory import (
    ALWAYS_FITS,
    ENV,
    KERNELS,
    LOCAL_SIZE_ENV,
    MemoryLimitError,
    available_bytes,
    check_fits,
    filter_bytes,
    ranks_on_node,
)
from parvox.testing import mpi_test

from ..cli._helpers import check_ok, run_parvox


def test_scipy_estimate_grows_with_the_square_of_the_window_histograms_do_not() -> None:
    small = filter_bytes("scipy", (75, 400), np.uint8, (21, 21))
    large = filter_bytes("scipy", (75, 400), np.uint8, (201, 201))
    assert large > 6 * 2**30 and large / small > 5000  # what killed the user's run
    hist = [filter_bytes("histogram-u8", (75, 400), np.uint8, (s, s)) for s in (21, 201)]
    assert hist[1] < 8 * 2**20 and hist[1] / hist[0] < 30  # the halo only


def test_estimates_are_positive_and_grow_with_the_block() -> None:
    for kernel in KERNELS:
        a = filter_bytes(kernel, (50, 60), np.float32, (5, 5))
        b = filter_bytes(kernel, (100, 60), np.float32, (5, 5))
        assert 0 < a < b, kernel
    with pytest.raises(ValueError, match="kernel must be one of"):
        filter_bytes("fft", (5, 5), np.uint8, (3, 3))


def test_available_memory_override(monkeypatch) -> None:
    monkeypatch.setenv(ENV, "3M")
    assert available_bytes() == 3 * 2**20
    monkeypatch.setenv(ENV, "12345")
    assert available_bytes() == 12345
    monkeypatch.setenv(ENV, "lots")
    with pytest.raises(ParameterError) as info:
        available_bytes()
    assert info.value.param == ENV
    monkeypatch.delenv(ENV)
    assert available_bytes() > 0


def test_ranks_on_node_from_the_launcher_or_the_communicator(monkeypatch) -> None:
    class Comm:
        def Get_size(self) -> int:
            return 5

    for name in LOCAL_SIZE_ENV:
        monkeypatch.delenv(name, raising=False)
    assert ranks_on_node(Comm()) == 5  # no launcher count: all on one node (cautious)
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3")
    assert ranks_on_node(Comm()) == 3
    monkeypatch.setenv("MPI_LOCALNRANKS", "2")
    assert ranks_on_node(Comm()) == 2


def test_small_estimates_pass_without_a_look_at_the_machine(monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(_memory, "available_bytes", lambda: 0)  # a machine with nothing free
    check_fits(ALWAYS_FITS)  # no look, no message
    with pytest.raises(MemoryLimitError):
        check_fits(ALWAYS_FITS + 1)


def test_check_fits_names_size(monkeypatch) -> None:
    monkeypatch.setenv(ENV, "1M")
    check_fits(2**19)
    with pytest.raises(MemoryLimitError) as info:
        check_fits(2**21, size=200, what="median filter")
    assert isinstance(info.value, ParameterError) and info.value.param == "size"
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("size 200: median filter needs about 2.0 MiB")


@mpi_test(ranks=(1, 2, 3), timeout=120)
def test_filters_refuse_before_any_work_on_every_rank():
    import os

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    a = np.random.default_rng(0).integers(0, 256, (60, 80)).astype(np.uint8)
    x = DistArray.from_global(a)
    os.environ[ENV] = "64K"
    try:
        for call, param in [
            (lambda: pnd.median_filter(x, size=41), "size"),
            (lambda: pnd.percentile_filter(x.astype(np.float32), 20, size=31), "size"),
            (lambda: pnd.minimum_filter(x, footprint=np.eye(41, dtype=bool)), "footprint"),
        ]:
            with pytest.raises(MemoryLimitError) as info:
                call()
            assert info.value.param == param
        os.environ[ENV] = "1G"
        assert pnd.median_filter(x, size=41).shape == a.shape
    finally:
        del os.environ[ENV]


def test_cli_refuses_in_one_line_with_exit_2(tmp_path, monkeypatch) -> None:
    write_image(tmp_path / "cells.png", np.zeros((300, 400), np.uint8))
    monkeypatch.setenv(ENV, "1M")
    for args, words in [
        (["--op", "median", "--size", "200", "-n", "2"], "size 200: --op median"),
        (["--op", "gaussian", "--sigma", "30", "-n", "2"], "sigma 30.0: --op gaussian"),
        (["--op", "distance"], "size: --op distance of (300, 400)"),
    ]:
        out = "p.npy" if args[1] == "gaussian" or args[1] == "distance" else "p.png"
        proc = run_parvox("filter", str(tmp_path / "cells.png"), str(tmp_path / out), *args)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], lines
        assert not (tmp_path / out).exists()


def test_the_users_command_finishes_and_equals_the_reference(tmp_path) -> None:
    # issue 27: size 200 on 300x400 uint8 at 4 ranks (nearest: a numpy reference that needs
    # no scipy, whose own median needs over 10 GB here)
    a = np.random.default_rng(1).integers(0, 256, (300, 400)).astype(np.uint8)
    write_image(tmp_path / "cells.png", a)
    check_ok(run_parvox("filter", str(tmp_path / "cells.png"), str(tmp_path / "p.png"),
                        "--op", "median", "--size", "200", "--mode", "nearest", "-n", "4"))
    got = read_image(tmp_path / "p.png")
    e = extend(a, [(100, 99), (100, 99)], "nearest")
    rows = [0, 1, 57, 149, 150, 299]
    for r in rows:
        windows = sliding_window_view(e[r : r + 200], (200, 200))[0].reshape(400, -1)
        want = np.partition(windows, 20000, axis=1)[:, 20000]
        np.testing.assert_array_equal(got[r], want, err_msg=f"row {r}")
