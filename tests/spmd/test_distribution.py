"""The checker follows which part of each variable each rank holds (issue 27).

Programs that read data a rank does not hold are refused at the exact read, naming the
directive to add; correct programs (the examples among them) pass untouched; the refusals are
real: the issue's programs, translated regardless, print something else at 3 ranks than
serially, and their corrections print the same.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from parvox.spmd import analyse, check, read_source
from parvox.spmd.distribution import ENTIRE, FULL, State, meet
from parvox.spmd.translator import render

from ..cli._helpers import check_ok, run_parvox
from ._programs import PROGRAMS, corrected, serial_stdout
from .test_checker import found

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples" / "spmd"
DRIVER = HERE / "_portability_driver.py"

HEAD = "#$spmd init\nimport numpy as np\nn = 12\n"  # lines 1-3
TAIL = "#$spmd end\n"


def program(body: str) -> str:
    return HEAD + textwrap.dedent(body).lstrip("\n") + TAIL


# ------------------------------------------------------------------ the issue's three programs
@pytest.mark.parametrize(
    ("name", "line", "col", "words"),
    [
        (
            "halo_missing",
            13,
            14,
            "`r2a[P: img]` (line 9) sends no neighbour rows: write `r2a[P(X=1): img]`",
        ),
        ("unsent", 15, 14, "send it whole with `#$spmd r2a[E: lut]` before line 13"),
        ("ungathered", 15, 11, "gather it on the root with `#$spmd a2r[P: out]` before line 14"),
    ],
)
def test_the_issue_programs_are_refused_where_they_go_wrong(name, line, col, words):
    path = PROGRAMS / f"{name}.py"
    got = [d for d in check(path.read_text(), str(path)) if d.severity == "error"]
    assert [(d.line, d.col + 1) for d in got] == [(line, col)], got
    assert words in got[0].message, got[0].message
    assert check(corrected(name), f"{name}_fixed.py") == []


def test_check_prints_file_line_col_and_exits_2(capsys):
    from parvox.cli import main

    path = str(PROGRAMS / "halo_missing.py")
    assert main(["spmd", "check", path]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{path}:13:14: error: `img[i - 1]` reads 1 row(s) beyond")
    assert out[-1] == f"{path}: 1 error, 0 warnings"


# ------------------------------------------------------------------ more of the class
CASES = [
    (  # a halo too narrow: X=1 but reads i + 2
        """
        a = np.zeros(n)
        #$spmd r2a[P(X=1): a]
        b = np.zeros(n)
        #$spmd dopar
        for i in range(2, n - 2):
            b[i] = a[i - 1] + a[i + 2]
        #$spmd a2r[P: b]
        """,
        (
            9,
            23,
            "error",
            "`r2a[P(X=1): a]` (line 5) sends only 1 neighbour rows: write `r2a[P(X=2): a]`",
        ),
    ),
    (  # a scalar accumulated in a dopar loop, printed by the root without a reduction
        """
        a = np.ones(n)
        hi = 0.0
        #$spmd dopar
        for i in range(n):
            hi = max(hi, a[i])
        #$spmd ronly
        print(hi)
        #$spmd ronly
        """,
        (10, 7, "error", "combine it on the root with `#$spmd ror[MAX: hi]` before line 9"),
    ),
    (  # a sum accumulated in one loop and used by the next without roa
        """
        a = np.ones(n)
        total = 0
        #$spmd dopar
        for i in range(n):
            total += a[i]
        #$spmd dopar
        for i in range(n):
            a[i] = a[i] / total
        #$spmd a2r[P: a]
        """,
        (11, 19, "error", "combine the ranks' results with `#$spmd roa[SUM: total]` before line 9"),
    ),
    (  # ror where every rank needs the result
        """
        a = np.ones(n)
        hi = 0.0
        #$spmd dopar
        for i in range(n):
            hi = max(hi, a[i])
        #$spmd ror[MAX: hi]
        #$spmd dopar
        for i in range(n):
            a[i] = a[i] / hi
        #$spmd a2r[P: a]
        """,
        (
            12,
            19,
            "error",
            "reduce it with `#$spmd roa` (every rank gets the result) instead of ror at line 9",
        ),
    ),
    (  # a2r missing before a file write on the root, through a derived value
        """
        out = np.zeros(n)
        #$spmd dopar
        for i in range(n):
            out[i] = i * i
        scaled = out / 2
        #$spmd ronly
        np.save("out.npy", scaled)
        #$spmd ronly
        """,
        (
            10,
            20,
            "error",
            "it comes from out: gather it on the root with `#$spmd a2r[P: out]` before line 9",
        ),
    ),
    (  # a scalar set on the root only, read in a dopar loop
        """
        out = np.zeros(n)
        k = 0
        #$spmd ronly
        k = 3
        #$spmd ronly
        #$spmd dopar
        for i in range(n):
            out[i] = i * k
        #$spmd a2r[P: out]
        """,
        (11, 18, "error", "send it with `#$spmd r2a[k]` before line 9"),
    ),
    (  # a2r of an array the root filled: it would overwrite the root's rows
        """
        a = np.zeros(n)
        #$spmd ronly
        a[:] = 5
        #$spmd ronly
        #$spmd a2r[P: a]
        """,
        (
            8,
            15,
            "error",
            "would overwrite the root's rows with them; send it from the root with `#$spmd r2a[P: a]`",
        ),
    ),
    (  # r2a of an array computed in parts: the root does not hold it
        """
        a = np.zeros(n)
        #$spmd dopar
        for i in range(n):
            a[i] = i
        #$spmd r2a[E: a]
        """,
        (8, 15, "error", "gather it first with `#$spmd a2r[P: a]` before line 8"),
    ),
    (  # a dopar loop carrying a dependence down the rows
        """
        a = np.ones(n)
        #$spmd dopar
        for i in range(1, n):
            a[i] = a[i] + a[i - 1]
        #$spmd a2r[P: a]
        """,
        (7, 19, "error", "use `#$spmd pipe[a, 1]` at line 5"),
    ),
    (  # a dopar loop writing a row of another rank
        """
        a = np.zeros(n + 1)
        #$spmd dopar[a]
        for i in range(n):
            a[i + 1] = i
        #$spmd a2r[P: a]
        """,
        (7, 5, "error", "writes a row of another rank's part"),
    ),
    (  # a halo read at i = 0 wraps to the last row
        """
        a = np.ones(n)
        #$spmd r2a[P(X=1): a]
        b = np.zeros(n)
        #$spmd dopar
        for i in range(n):
            b[i] = a[i - 1]
        #$spmd a2r[P: b]
        """,
        (9, 12, "error", "use the cyclic `P(XC=1): a` or start the loop at 1"),
    ),
    (  # dodyn reading parts: rows go to whichever rank asks
        """
        a = np.ones(n)
        #$spmd r2a[P: a]
        b = np.zeros(n)
        #$spmd dodyn[2, b]
        for i in range(n):
            b[i] = a[i] * 2
        #$spmd ronly
        print(b.sum())
        #$spmd ronly
        """,
        (9, 12, "error", "send it with `#$spmd r2a[E: a]` before line 7"),
    ),
    (  # a name first assigned inside ronly: the other ranks have none to receive into
        """
        a = np.ones(n)
        #$spmd ronly
        import json
        scale = json.loads("2.5")
        #$spmd ronly, r2a[scale]
        a *= scale
        """,
        (
            8,
            19,
            "error",
            "assign it on every rank before line 5 (as the serial program would, e.g. `scale = None`), then send it with `#$spmd r2a[scale]`",
        ),
    ),
    (  # a convergence test on each rank's own error: the ranks leave the loop apart
        """
        u = np.ones(n)
        #$spmd r2a[P(X=1): u]
        err = 1.0
        while err > 0.1:
            err = 0.0
            #$spmd dopar
            for i in range(1, n - 1):
                err = max(err, abs(u[i - 1] - u[i]))
            #$spmd a2a[P(X=1): u]
        #$spmd a2r[P: u]
        """,
        (
            7,
            7,
            "error",
            "the ranks may take different ways and wait for each other forever; reduce it first with `#$spmd roa[MAX: err]` before line 7",
        ),
    ),
    (  # a SUM of a scalar every rank holds whole counts it once per rank
        """
        total = n * 2
        #$spmd roa[SUM: total]
        """,
        (5, 17, "warning", "the SUM over the ranks counts it once per rank"),
    ),
    (  # a computed index: a note, not an error
        """
        a = np.ones(n)
        #$spmd r2a[P: a]
        idx = (np.arange(n) * 5) % n
        b = np.zeros(n)
        #$spmd dopar
        for i in range(n):
            b[i] = a[idx[i]]
        #$spmd a2r[P: b]
        """,
        (10, 12, "note", "cannot tell which rows `a[idx[i]]` reads"),
    ),
    (  # a branch that skips the exchange on one path: the merge keeps the weaker state
        """
        a = np.ones(n)
        #$spmd r2a[P: a]
        b = np.zeros(n)
        if n > 3:
            #$spmd a2a[P(X=1): a]
            pass
        #$spmd dopar
        for i in range(1, n - 1):
            b[i] = a[i - 1]
        #$spmd a2r[P: b]
        """,
        (12, 12, "error", "`r2a[P: a]` (line 5) sends no neighbour rows: write `r2a[P(X=1): a]`"),
    ),
    (  # a loop that swaps the arrays but exchanges none: wrong from the second pass on
        """
        a = np.ones(n)
        #$spmd r2a[P(X=1): a]
        b = a.copy()
        for _ in range(3):
            #$spmd dopar
            for i in range(1, n - 1):
                b[i] = a[i - 1] + a[i + 1]
            a, b = b, a
        #$spmd a2r[P: a]
        """,
        (10, 16, "error", "exchange the neighbour rows with `#$spmd a2a[P(X=1): a]` before line 8"),
    ),
]


@pytest.mark.parametrize(("body", "want"), CASES, ids=[f"case{k}" for k in range(len(CASES))])
def test_each_mistake_of_the_class_is_found_at_its_read(body, want):
    got = found(program(body))
    assert len(got) == 1, got
    line, col, severity, words = want
    assert got[0][:3] == (line, col, severity), got
    assert words in got[0][3], got[0][3]


# ------------------------------------------------------------------ no false positives
CORRECT = [
    """
    u = np.zeros(n)
    #$spmd ronly
    u[:] = np.arange(n) % 5
    #$spmd ronly, r2a[P(X=1): u]
    new = u.copy()
    err, tol = 1.0, 0.1
    while err > tol:
        #$spmd a2a[P(X=1): u]
        err = 0.0
        #$spmd dopar
        for i in range(1, n - 1):
            new[i] = (u[i - 1] + u[i + 1]) / 2
            err = max(err, abs(new[i] - u[i]))
        #$spmd roa[MAX: err]
        u, new = new, u
    #$spmd a2r[P: u]
    #$spmd ronly
    np.save("u.npy", u)
    print(err, len(new), new.shape)
    #$spmd ronly
    """,
    """
    def smooth(img, out):
        #$spmd dopar
        for i in range(1, len(img) - 1):
            out[i] = img[i - 1] + img[i + 1]
    a = np.ones((n, 3))
    acc = np.zeros(3)
    rows = []
    #$spmd r2a[P(XC=1): a]
    b = np.zeros_like(a)
    #$spmd dopar
    for i in range(n):
        b[i, 0] = a[i - 1, 0] + a[(i + 1) % n, 0] * 0
        for j in range(1, 3):
            b[i, j] = a[i, j - 1]
        acc[:] += a[i]
    #$spmd roa[SUM: acc], a2a[E: b]
    #$spmd dopar
    for i in range(n):
        b[i] = b[n - 1 - i] + acc
    #$spmd a2r[P: b]
    #$spmd ronly
    print(b.sum(), acc)
    #$spmd ronly
    """,
    """
    a = np.ones(n)
    thr, data = None, None
    #$spmd ronly
    thr = 0.5
    data = np.load("x.npy") if n < 0 else np.ones(n)
    #$spmd ronly, r2a[thr; E: data]
    #$spmd dopar
    for i in range(n):
        a[i] = data[i] > thr
    #$spmd ror[MAX: thr]
    #$spmd a2r[P: a], barrier
    #$spmd ronly
    print(a, thr)
    #$spmd ronly
    """,
]


CORRECT.append(  # a loop over the rows on every rank keeps each rank's rows its own
    """
    img = np.ones((n, 2))
    #$spmd r2a[P(X=1): img]
    tmp = np.zeros_like(img)
    for y in range(1, n - 1):
        tmp[y] = img[y - 1] + img[y]
    out = np.zeros(n)
    #$spmd dopar
    for y in range(n):
        out[y] = tmp[y].sum()
    #$spmd a2r[P: out]
    """
)


@pytest.mark.parametrize("body", CORRECT, ids=[f"correct{k}" for k in range(len(CORRECT))])
def test_correct_programs_pass(body):
    assert [f for f in found(program(body)) if f[2] != "warning"] == []


@pytest.mark.parametrize(
    "path",
    sorted(p for p in EXAMPLES.glob("*.py") if not p.stem.endswith("_translated")),
    ids=lambda p: p.stem,
)
def test_the_examples_pass(path):
    assert check(path.read_text(), str(path)) == []


def test_meet_is_the_weaker_state():
    parts = State(False, 0)
    halo = State(True, 2, cyclic=True)
    assert meet(ENTIRE, halo) == halo
    assert meet(halo, parts).rows == 0 and not meet(halo, parts).root
    assert meet(State(True, None), parts) == State(False, None)
    assert meet(State(False, None, partial="SUM"), ENTIRE).partial == "SUM"
    assert meet(State(False, None, partial="SUM"), State(False, None, partial="MAX")).partial == ""
    assert meet(ENTIRE, ENTIRE).rows == FULL


# ------------------------------------------------------------------ the refusals are real
def _translate_anyway(path: Path) -> str:
    """The translation of a program the checker refuses, made regardless."""
    analysis = analyse(read_source(path.read_text(), path.name))
    kept = tuple(d for d in analysis.diagnostics if d.severity != "error")
    return render(dataclasses.replace(analysis, diagnostics=kept))


def test_refused_programs_differ_at_3_ranks_and_their_corrections_do_not(tmp_path):
    names = ["halo_missing", "unsent", "ungathered", "computed"]
    programs = []
    for name in names:
        for stem, text in (
            (name, (PROGRAMS / f"{name}.py").read_text()),
            (f"{name}_fixed", corrected(name)),
        ):
            copy = tmp_path / f"{stem}.py"
            copy.write_text(text)
            copy.with_name(f"{stem}_translated.py").write_text(_translate_anyway(copy))
            programs.append(copy)
    serial = {prog.stem: serial_stdout(prog, tmp_path) for prog in programs}
    out = tmp_path / "runs"
    check_ok(
        run_parvox(str(out), *map(str, programs), mpiexec=3, driver=[str(DRIVER)], timeout=300)
    )
    for name in names:
        assert (out / f"{name}_fixed.stdout").read_text() == serial[f"{name}_fixed"] != ""
        assert (out / f"{name}.stdout").read_text() != serial[name], name
