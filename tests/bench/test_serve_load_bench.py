"""bench/serve_load.py: the CPU of a rank's threads, read from /proc (no server)."""

import os
import sys
import threading
import time

import pytest


@pytest.fixture(scope="module")
def bench(bench_script):
    return bench_script("serve_load")


def test_thread_groups_sum_workers_and_name_the_main_thread(bench):
    before = {"10": ("python", 1.0), "11": ("dispatch_0", 0.5), "12": ("dispatch_1", 0.25)}
    after = {"10": ("python", 1.5), "11": ("dispatch_0", 1.0), "12": ("dispatch_1", 0.5),
             "13": ("dispatch_2", 0.25), "14": ("slice-extract-0", 2.0)}
    assert bench.thread_groups(before, after, 10) == {"slice-extract": 2.0, "dispatch": 1.0,
                                                      "main": 0.5}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_a_busy_named_thread_shows_its_cpu(bench):
    """A thread's CPU is counted under its native name less the worker number."""
    from parvox.threads import set_native_name

    live = threading.Event()
    stop = threading.Event()

    def spin_until_stopped():
        set_native_name()
        end = time.thread_time() + 0.2
        while time.thread_time() < end:
            pass
        live.set()
        stop.wait(30)

    before = bench.thread_cpu(os.getpid())
    t = threading.Thread(target=spin_until_stopped, name="parvox-spinner_7")
    t.start()
    assert live.wait(30)
    groups = bench.thread_groups(before, bench.thread_cpu(os.getpid()), os.getpid())
    stop.set()
    t.join(timeout=30)
    assert groups["spinner"] >= 0.15


def test_the_docstring_examples_run(bench):
    import doctest

    result = doctest.testmod(bench)
    assert result.attempted >= 1 and result.failed == 0


def test_the_ceiling_is_cores_over_the_work_per_slice_against_the_engine(bench):
    # engine: 250 slices/s; its ranks work 6 ms a slice; the server adds 2 ms: on 2 cores at
    # most 2 / 8 ms = 250 slices/s, the engine's rate
    assert bench.ceiling(2, 250.0, 0.006, 0.002) == pytest.approx(1.0)
    # the same work on 1 core: half of it; with 4 ms more per slice, 2 / 12 ms of 250/s
    assert bench.ceiling(1, 250.0, 0.006, 0.002) == pytest.approx(0.5)
    assert bench.ceiling(2, 250.0, 0.006, 0.006) == pytest.approx(2 / 0.012 / 250)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_the_host_ticks_grow_and_idle_is_part_of_them(bench):
    idle0, total0 = bench.host_jiffies()
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    idle1, total1 = bench.host_jiffies()
    assert 0 <= idle0 <= total0 and 0 <= idle1 - idle0 <= total1 - total0
    assert total1 > total0


def test_the_encoding_time_is_of_the_answered_image(bench):
    import numpy as np

    from parvox.server.png import encode_png

    body = encode_png(np.arange(64 * 48 * 3, dtype=np.uint8).reshape(64, 48, 3))
    assert bench.encode_ms(body, "png", 1, repeats=3) > 0
    assert bench.encode_ms(body, "jpeg", 1, repeats=3) > 0


def test_the_png_level_is_the_servers_option_or_its_default(bench):
    from parvox.server.imaging import DEFAULT_PNG_LEVEL

    assert bench.served_png_level([]) == DEFAULT_PNG_LEVEL
    assert bench.served_png_level(["--config", "m.json", "--png-level", "6"]) == 6
    assert bench.served_png_level(["--png-level=3", "--no-heap-retain"]) == 3
