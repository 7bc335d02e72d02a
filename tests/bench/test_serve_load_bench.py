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
