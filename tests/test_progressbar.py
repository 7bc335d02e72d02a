"""parvox.progressbar: off by default, a callable gets the counts, a bar only on the root."""

from __future__ import annotations

import pytest

from parvox.progressbar import check_progress, progress_bar
from parvox.testing import mpi_test


def test_a_callable_receives_done_and_total():
    seen = []
    with progress_bar(lambda done, total: seen.append((done, total)), 7, desc="x") as bar:
        bar.update(3)
        bar.update()
        bar.update(3)
    assert seen == [(3, 7), (4, 7), (7, 7)]


def test_false_draws_nothing_and_true_draws_a_bar(capsys):
    with progress_bar(False, 5, desc="quiet") as bar:
        bar.update(5)
    assert bar.done == 5
    assert capsys.readouterr() == ("", "")
    with progress_bar(True, 5, desc="loud") as bar:
        bar.update(5)
    assert "loud" in capsys.readouterr().err


def test_anything_else_is_refused_naming_the_parameter():
    with pytest.raises(ValueError, match="progress_bar: expected False, True") as info:
        check_progress("yes", "progress_bar")
    assert info.value.param == "progress_bar"
    with pytest.raises(ValueError, match="progress"):
        progress_bar(1, 5)


@mpi_test(ranks=(1, 3), timeout=30)
def test_only_the_root_reports():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    seen = []
    root = comm.Get_size() - 1
    with progress_bar(lambda d, t: seen.append(d), 2, comm=comm, root=root) as bar:
        bar.update(2)
    assert seen == ([2] if comm.Get_rank() == root else [])
