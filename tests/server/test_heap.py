"""parvox.server.heap: freed buffers stay in the heap (page faults counted by the kernel)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from parvox.server.heap import MMAP_THRESHOLD, retain_freed_memory

# In a fresh thread (whose heap is an arena of its own, like the server's extraction thread)
# allocates and touches four 3 MiB buffers, then frees them, 16 times over (a token's parts,
# its message and the copies in between), and prints the thread's minor page faults before
# and after retain_freed_memory().
_PROBE = textwrap.dedent(
    """
    import resource, threading
    import numpy as np
    from parvox.server.heap import retain_freed_memory

    def faults():
        out = []
        def work():
            before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
            for _ in range(16):
                bufs = [np.empty(3 << 20, np.uint8) for _ in range(4)]
                for buf in bufs:
                    buf[::4096] = 1  # touch every page
                del bufs, buf
            out.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
        t = threading.Thread(target=work)
        t.start()
        t.join()
        return out[0]

    default = faults()
    applied = retain_freed_memory()
    print(default, faults(), applied)
    """
)


def _huge_pages_always() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as fh:
            return "[always]" in fh.read()
    except OSError:
        return False


# 3 MiB buffers stay below NumPy's 4 MiB hint for huge pages; with huge pages always on, a
# fault maps 2 MiB and the counts below say nothing
@pytest.mark.skipif(not sys.platform.startswith("linux") or _huge_pages_always(),
                    reason="glibc malloc, RUSAGE_THREAD and 4 KiB pages")
def test_freed_buffers_are_reused_without_page_faults():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    default, retained, applied = int(out[0]), int(out[1]), out[2] == "True"
    assert applied
    pages = 16 * 4 * (3 << 20) // 4096  # touched in all
    # glibc's default: the freed top of the heap is trimmed and faulted in again (here about
    # half the pages each round)
    assert default > pages // 4
    # retained: the first round's pages are faulted in once, then reused
    assert retained < pages // 16
    assert retained * 8 < default


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"mmap_threshold": MMAP_THRESHOLD + 1}, "mmap_threshold"),
     ({"mmap_threshold": -1}, "mmap_threshold"),
     ({"trim_threshold": 2**31}, "trim_threshold")],
)
def test_out_of_range_thresholds_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        retain_freed_memory(**kwargs)


def test_server_option_and_flag(tmp_path):
    import argparse

    from parvox.cli import serve
    from parvox.errors import ParameterError
    from parvox.server.options import ServerOptions

    assert ServerOptions().heap_retain is True
    with pytest.raises(ParameterError, match="heap_retain") as info:
        ServerOptions(heap_retain="no")  # type: ignore[arg-type]
    assert info.value.param == "heap_retain"
    (tmp_path / "volume.json").write_text("{}")
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    for argv, expected in (([], True), (["--no-heap-retain"], False), (["--heap-retain"], True)):
        args = parser.parse_args([str(tmp_path), *argv])
        serve.validate(args)
        assert args.options.heap_retain is expected
