"""bench/threads.py: which kernels take a thread count, and its command line (no MPI job)."""

import sys

import pytest


@pytest.fixture(scope="module")
def bench(bench_script):
    return bench_script("threads")


def test_a_kernel_without_the_keyword_is_not_available(bench):
    from parvox import ndimage
    from parvox.recon import forward_project

    def plain(x, size=3):
        return x

    assert not bench.takes(plain, "threads")
    assert bench.takes(lambda x, **kw: x, "threads")
    assert bench.takes(ndimage.label, "threads") and bench.takes(forward_project, "threads")
    assert not bench.takes(len, "threads")


def test_unknown_kernels_and_layouts_exit_2(bench, monkeypatch, capsys):
    for argv in (["--kernels", "label,nope"], ["--osem-layouts", "1x0"], ["--repeats", "0"],
                 ["--calls", "0"], ["--min-time", "-1"]):
        monkeypatch.setattr(sys, "argv", ["threads.py", *argv])
        with pytest.raises(SystemExit) as exc:
            bench.main()
        assert exc.value.code == 2
        assert "argument --" in capsys.readouterr().err
