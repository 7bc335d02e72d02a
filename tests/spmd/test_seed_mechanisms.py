"""Seed 003's PARBLOCK, NCPUS sections, root share (strategy A) and root-serves DODYN (strategy B).

Each mechanism has a program under ``seed_programs/``: it checks clean, and its plain serial
run and its translated runs at 1, 2, 3 and 4 ranks print the same, byte for byte (one
``mpiexec`` per rank count runs them all). Then the checker's errors, at their positions, the
translation, and the runtime calls with bad input.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from parvox.spmd import check, translate
from parvox.testing import mpi_test

from ..cli._helpers import check_ok, run_parvox
from ._programs import serial_stdout

HERE = Path(__file__).resolve().parent
FOLDER = HERE / "seed_programs"
PROGRAMS = sorted(FOLDER.glob("*.py"))
DRIVER = HERE / "_portability_driver.py"


def test_the_programs_are_there_and_check_clean():
    assert [p.stem for p in PROGRAMS] == [
        "ncpus",
        "nested",
        "parblock",
        "root_serves",
        "root_share",
    ]
    for p in PROGRAMS:
        assert check(p.read_text(), p.name) == [], p.name


@pytest.fixture(scope="module")
def translated(tmp_path_factory):
    """The programs and their translations side by side, and each one's serial stdout."""
    where = tmp_path_factory.mktemp("seed")
    serial = {}
    for p in PROGRAMS:
        shutil.copy(p, where / p.name)
        (where / f"{p.stem}_translated.py").write_text(translate(p.read_text(), p.name))
        serial[p.stem] = serial_stdout(p, where)
        assert serial[p.stem], f"{p.name} printed nothing: the comparison would prove little"
    return where, serial


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_translated_runs_print_what_the_serial_run_does(translated, tmp_path, nprocs):
    where, serial = translated
    programs = [str(where / p.name) for p in PROGRAMS]
    proc = run_parvox(str(tmp_path), *programs, mpiexec=nprocs, driver=[str(DRIVER)], timeout=300)
    check_ok(proc)
    for p in PROGRAMS:
        assert (tmp_path / f"{p.stem}.stdout").read_text() == serial[p.stem], (p.name, nprocs)
        for rank in range(1, nprocs):
            assert (tmp_path / f"{p.stem}.rank{rank}.stdout").read_text() == ""
    # ncpus=2 on fewer ranks runs on all of them, with a warning
    assert ("ncpus=2: the job has 1 rank" in proc.stderr) == (nprocs == 1)


# ---------------------------------------------------------------- checker errors
HEAD = "#$spmd init\nimport numpy as np\na = np.zeros((8, 3))\nn = 8\n"  # lines 1-4


def found(body: str) -> list[tuple[int, int, str, str]]:
    text = HEAD + textwrap.dedent(body).lstrip("\n") + "#$spmd end\n"
    return [(d.line, d.col + 1, d.severity, d.message) for d in check(text, "p.py")]


@pytest.mark.parametrize(
    ("body", "line", "col", "words"),
    [
        # PARBLOCK
        (
            "#$spmd parblock\nx = 1\n#$spmd section\n#$spmd barrier\ny = 2\n#$spmd parblock\n",
            8,
            8,
            "barrier inside the parblock of line 5",
        ),
        (
            "#$spmd parblock\nx = n + 1\n#$spmd section\ny = x * 2\n#$spmd parblock\n",
            8,
            5,
            "`x` is assigned by another section of the parblock of line 5",
        ),
        (
            "#$spmd parblock\nx = 1\n#$spmd section\n#$spmd section\ny = 2\n#$spmd parblock\n",
            7,
            1,
            "an empty section of the parblock of line 5",
        ),
        (
            "#$spmd parblock\nx = 1\n#$spmd section\nx = 2\n#$spmd parblock\n",
            7,
            1,
            "two sections of the parblock of line 5 assign `x`",
        ),
        ("x = 1\n#$spmd section\n", 6, 8, "section outside a parblock"),
        ("#$spmd parblock\nx = 1\n", 5, 1, "this parblock is never closed"),
        (
            "#$spmd dopar\nfor i in range(n):\n    a[i] = i\n"
            "#$spmd parblock\nx = a.sum()\n#$spmd section\ny = 2\n#$spmd parblock\n",
            9,
            5,
            "a parblock section reads `a` on whichever rank runs it, but it is each rank's own rows",
        ),
        # NCPUS
        ("#$spmd ncpus=2\nx = 1\n", 5, 1, "this ncpus section is never closed"),
        ("x = 1\n#$spmd ncpus\n", 6, 8, "this ncpus closes no section"),
        (
            "#$spmd ncpus=2\n#$spmd ncpus=1\nx = 1\n#$spmd ncpus\n#$spmd ncpus\n",
            6,
            8,
            "an ncpus section inside the one opened at line 5",
        ),
        ("#$spmd ncpus=2\n#$spmd ncpus\n", 5, 1, "this ncpus section holds no code"),
        (
            "#$spmd ncpus=2\n#$spmd dopar\nfor i in range(n):\n    a[i] = i\n#$spmd ncpus\n",
            9,
            1,
            "every rank gets the root's `a` at the end of the ncpus section (line 9), but the root does not hold it whole",
        ),
        (
            "#$spmd ronly\n#$spmd ncpus=2\nx = 1\n#$spmd ncpus\n#$spmd ronly\n",
            6,
            8,
            "ncpus inside a ronly region",
        ),
        # root share
        ("#$spmd barrier, root_share=0.5\n", 5, 17, "write it with init"),
    ],
)
def test_errors_name_the_mechanism_at_its_position(body, line, col, words):
    errors = [f for f in found(body) if f[2] == "error"]
    assert errors, found(body)
    assert (errors[0][0], errors[0][1]) == (line, col), errors
    assert words in errors[0][3], errors[0][3]


def test_root_share_refuses_neighbour_rows():
    text = (
        "#$spmd init, root_share=0.5\nimport numpy as np\na = np.zeros((8, 3))\n"
        "#$spmd r2a[P(X=1): a]\n#$spmd end\n"
    )
    [d] = check(text, "p.py")
    assert (d.line, d.col + 1, d.severity) == (4, 12, "error")
    assert "neighbour rows (X=n) need the even split, but root_share=0.5 (line 1)" in d.message
    assert check(text.replace("0.5", "1"), "p.py") == []


def test_after_a_parblock_and_an_ncpus_section_every_rank_holds_what_they_assigned():
    body = """\
    #$spmd parblock
    x = a.sum()
    #$spmd section
    y = n * 2
    #$spmd parblock
    #$spmd ncpus=2, r2a[P: a]
    #$spmd dopar
    for i in range(n):
        a[i] = a[i] + i
    #$spmd a2r[P: a]
    #$spmd ncpus
    #$spmd dopar
    for i in range(n):
        a[i] = a[i] + x + y
    #$spmd a2r[P: a]
    """
    assert found(body) == []
    # without the gather inside the section, the root would hand out stale parts
    gather = "    #$spmd a2r[P: a]\n    #$spmd ncpus\n"
    assert body.count(gather) == 1
    [problem] = found(body.replace(gather, "    #$spmd ncpus\n"))
    assert problem[:2] == (14, 1) and "the root does not hold it whole" in problem[3]


# ---------------------------------------------------------------- translation
def test_translation_of_each_mechanism():
    text = {p.stem: translate(p.read_text(), p.name) for p in PROGRAMS}
    assert "spmd.set_root_share(0.5)" in text["root_share"]
    assert "spmd.dyn_range(range(n), img, chunk=3, root_works=False)" in text["root_serves"]
    assert "the root only serves, it runs none" in text["root_serves"]
    assert "if spmd.ncpus_begin(2):\n    # spmd: r2a" in text["ncpus"]
    assert "out, peak = spmd.ncpus_end(lambda: (out, peak))" in text["ncpus"]
    assert "if spmd.section(2):\n    edges = " in text["parblock"]
    assert (
        "hist, smooth, edges = spmd.parblock_end(lambda: (hist,), lambda: (smooth,), "
        "lambda: (edges,))"
    ) in text["parblock"]


def test_clauses_before_a_closing_ncpus_run_inside_the_section():
    text = translate(GATHER_THEN_CLOSE, "g.py")
    assert "#$spmd a2r[P: out], ncpus\n    # spmd: a2r" in text
    assert "    spmd.a2r_part(out)\n# spmd: ncpus -- end of the section" in text


GATHER_THEN_CLOSE = """\
#$spmd init
import numpy as np

out = np.zeros((11, 2))
#$spmd ncpus=2
#$spmd dopar
for i in range(11):
    out[i] = i
#$spmd a2r[P: out], ncpus
#$spmd end
"""


# ---------------------------------------------------------------- the runtime
def test_ncpus_below_one_names_ncpus():
    from parvox.errors import ParameterError
    from parvox.spmd.runtime import Runtime

    rt = Runtime()
    for bad in (0, -2, 1.5):
        with pytest.raises(ParameterError) as info:
            rt.ncpus_begin(bad)
        assert info.value.param == "ncpus"
    with pytest.raises(ValueError, match="no ncpus section"):
        rt.ncpus_end()


@mpi_test(timeout=90)
def test_ncpus_runs_on_a_freed_sub_communicator_and_shares_the_roots_values():
    import numpy as np
    from mpi4py import MPI

    from parvox.spmd.runtime import Runtime

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    rt = Runtime()
    rt.init()
    for n in (1, 2, size, size + 3):
        inside = rt.ncpus_begin(n)
        assert inside == (rank < n)
        value = None
        if inside:
            assert rt.size == min(n, size) and rt.comm.Get_size() == min(n, size)
            part = np.zeros(10)
            for i in rt.my_range(range(10), part):
                part[i] = i * i
            rt.a2r_part(part)
            value = part
            sub = rt.comm
        (got,) = rt.ncpus_end(lambda value=value: (value,))
        np.testing.assert_array_equal(got, np.arange(10.0) ** 2)
        assert rt.comm is world or rt.comm.Get_size() == size
        assert (rt.rank, rt.size) == (rank, size)
        if inside and n < size:
            assert sub == MPI.COMM_NULL  # Free() nulls the handle: the section's comm is gone


@mpi_test(timeout=90)
def test_parblock_sections_run_once_each_and_everyone_gets_their_results():
    from mpi4py import MPI

    from parvox.spmd.runtime import Runtime

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    rt = Runtime()
    for count in (1, 2, 5):
        ran = [k for k in range(count) if rt.section(k)]
        assert ran == [k for k in range(count) if k % size == rank]
        assert sorted(k for part in world.allgather(ran) for k in part) == list(range(count))
        got = rt.parblock_end(*(lambda k=k: (k, k * 10) for k in range(count)))
        assert got == tuple(v for k in range(count) for v in (k, k * 10))
