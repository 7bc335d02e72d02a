"""The checker: each problem the issue lists, and the ones placement brings, at exact positions.

Programs are written with ``|`` as the left margin; positions are (line, 1-based column) as
``parvox spmd check`` prints them.
"""

from __future__ import annotations

import textwrap

import pytest

from parvox.spmd import analyse, check, read_source
from parvox.spmd.diagnostics import Diagnostic, format_all

HEAD = "#$spmd init\nimport numpy as np\na = np.zeros((8, 3))\nn = 8\n"  # lines 1-4
TAIL = "#$spmd end\n"


def program(body: str) -> str:
    return HEAD + textwrap.dedent(body).lstrip("\n") + TAIL


def found(text: str) -> list[tuple[int, int, str, str]]:
    return [(d.line, d.col + 1, d.severity, d.message) for d in check(text, "p.py")]


def only(text: str) -> tuple[int, int, str, str]:
    got = found(text)
    assert len(got) == 1, got
    return got[0]


# ---------------------------------------------------------------- what the issue lists
@pytest.mark.parametrize(
    ("body", "line", "col", "words"),
    [
        ("#$spmd barrier, dopr\n", 5, 17, "unknown clause 'dopr'"),
        ("#$spmd ronly\nx = 1\n", 5, 1, "never closed"),
        ("#$spmd dopar\nx = 1\n", 5, 8, "dopar is not followed by a `for NAME in range(...)` loop"),
        ("#$spmd dopar\nwhile n:\n    n -= 1\n", 5, 8, "not followed by a `for"),
        ("#$spmd dopar\nfor i in [1, 2]:\n    a[i] = i\n", 5, 8, "needs a loop over `range(...)`"),
        ("#$spmd dopar\nfor i, j in range(3):\n    a[i] = i\n", 5, 8, "one variable"),
        (
            "#$spmd dopar\nfor i in range(8):\n    a[i] = i\nelse:\n    n = 0\n",
            5,
            8,
            "`else:` block",
        ),
        ("#$spmd a2r[E: a]\n", 5, 12, "a2r moves parts only: write a2r[P: a]"),
        ("#$spmd r2a[P: img]\n", 5, 15, "`img` is never assigned"),
        ("#$spmd dodyn[k, a]\nfor i in range(8):\n    a[i] = i\n", 5, 14, "`k` is never assigned"),
        ("#$spmd print[spmd.clock]\n", 5, 14, "the runtime has no spmd.clock"),
        ("#$spmd ronly\n#$spmd barrier\n#$spmd ronly\n", 6, 8, "barrier inside a ronly region"),
        (
            "#$spmd ronly\nx = 1\n#$spmd roa[SUM: n]\n#$spmd ronly\n",
            7,
            8,
            "roa inside a ronly region",
        ),
    ],
)
def test_the_listed_errors(body, line, col, words):
    got = found(program(body))[0]
    assert got[:3] == (line, col, "error") and words in got[3], got


def test_closing_ronly_may_carry_clauses_for_every_rank():
    text = program("#$spmd ronly\na[...] = 1\n#$spmd ronly, barrier, r2a[P(X=1): a]\n")
    assert found(text) == []


def test_a2r_and_a2a_forms():
    assert only(program("#$spmd a2r[n]\n"))[3].startswith("a2r moves array parts only")
    assert "without neighbour rows" in only(program("#$spmd a2r[P(X=1): a]\n"))[3]
    assert "for a scalar use roa or r2a" in only(program("#$spmd a2a[n]\n"))[3]
    assert "exchanges nothing" in only(program("#$spmd a2a[P: a]\n"))[3]
    assert found(program("#$spmd a2a[E: a; P(XC=n): a], r2a[n; E: a]\n")) == []


# ---------------------------------------------------------------- loops
def test_dopar_finds_the_arrays_it_splits_by():
    text = program(
        """
        b = np.zeros(8)
        #$spmd dopar
        for i in range(1, n - 1):
            a[i, 1:] = a[i - 1, 1:] + b[i]
            b[i] = 2
        """
    )
    (loop,) = [p.loop for p in analyse(read_source(text)).placements if p.loop]
    assert loop.arrays == ("a", "b")  # the written ones, in order
    read_only = program("total = 0\n#$spmd dopar\nfor y in range(8):\n    total += a[y].sum()\n")
    (loop,) = [p.loop for p in analyse(read_source(read_only)).placements if p.loop]
    assert loop.arrays == ("a",)
    none = program("total = 0\n#$spmd dopar\nfor y in range(8):\n    total += y\n")
    assert "indexes no array with `y`" in only(none)[3]
    assert found(none.replace("dopar", "dopar[a]")) == []


def test_loops_must_run_to_their_end_on_every_rank():
    text = program(
        """
        #$spmd dopar
        for i in range(8):
            for j in range(3):
                if j:
                    break
            a[i] = 1
            if i > 5:
                break
        """
    )
    assert only(text)[:2] == (12, 9) and "`break` would leave the dopar loop early" in only(text)[3]


def test_loop_clause_must_come_directly_before_its_loop():
    text = program(
        "#$spmd dopar\n# a plain comment is fine\n\n#$spmd barrier\nfor i in range(8):\n    a[i] = 1\n"
    )
    got = only(text)
    assert got[:2] == (8, 1) and "must come directly before its loop" in got[3]


def test_nested_and_communicating_inside_parallel_loops():
    text = program(
        """
        #$spmd dopar
        for i in range(8):
            #$spmd roa[SUM: n]
            a[i] = n
        """
    )
    assert "roa inside the dopar loop of line 6" in only(text)[3]
    nested = program(
        """
        #$spmd dodyn[2, a]
        for i in range(8):
            a[i] = 0
            #$spmd dopar
            for j in range(8):
                a[j] = i
        """
    )
    assert "parallel loops cannot be nested" in only(nested)[3]


def test_pipe_with_chunks_needs_one_inner_range_loop():
    good = program(
        "#$spmd pipe[a, 1, 2]\nfor i in range(1, 8):\n    for j in range(3):\n        a[i, j] = a[i - 1, j]\n"
    )
    assert found(good) == []
    bad = program("#$spmd pipe[a, 1, 2]\nfor i in range(1, 8):\n    a[i] = a[i - 1]\n")
    assert "the outer loop's body must be one `for NAME in range(...)` loop" in only(bad)[3]
    silent = program("#$spmd pipe[a, 1]\nfor i in range(1, 8):\n    n += i\n")
    assert only(silent)[2:] == (
        "warning",
        "the loop never writes a[i, ...]: pipe passes on the rows of a the loop computes",
    )


# ---------------------------------------------------------------- placement
def test_directives_in_blocks_take_their_indentation():
    text = program(
        """
        for k in range(3):
            #$spmd dopar
            for i in range(8):
                a[i] = k
            #$spmd a2a[E: a]
        if n:
            #$spmd barrier
            pass
            #$spmd barrier
        else:
            #$spmd barrier
            n = 1
        """
    )
    assert found(text) == []


@pytest.mark.parametrize(
    ("body", "line", "col", "words"),
    [
        ("for k in range(3):\n    n = k\n        #$spmd barrier\n", 7, 9, "(column 1, 5)"),
        ("if n:\n#$spmd barrier\n    n = 1\n", 6, 1, "(column 5)"),
        ("if n:\n    n = 1\n#$spmd barrier\nelse:\n    n = 2\n", 7, 1, "(column 5)"),
        (
            "#$spmd dopar\n    # the loop below is indented\nif n:\n    for i in range(8):\n        a[i] = 1\n",
            5,
            8,
            "not followed by",
        ),
        ("x = (1,\n#$spmd barrier\n    2)\n", 6, 1, "not inside brackets"),
        ("x = 1  #$spmd barrier\n", 5, 8, "not after code on its line"),
        ("#$spmd barrier,\nx = 1\n", 5, 15, "the next line is not a #$spmd line"),
        ("#$spmd\n", 5, 7, "empty directive"),
    ],
)
def test_misplaced_directives(body, line, col, words):
    got = [g for g in found(program(body)) if g[2] == "error"]
    assert len(got) == 1, got
    assert got[0][:2] == (line, col) and words in got[0][3], got


def test_a_continued_directive_is_one_directive():
    text = program("#$spmd ronly, time!,\n  #$spmd print['took', spmd.time]\n")
    d = read_source(text).directives[1]
    assert d.lines == (5, 6) and [c.keyword for c in d.clauses] == ["ronly", "time", "print"]
    assert found(text) == [
        (
            5,
            15,
            "warning",
            "time! appears 1 times: each use starts or stops the timer, so they come in pairs",
        )
    ]


def test_a_ronly_region_stays_in_its_block():
    leaves = program("for k in range(2):\n    #$spmd ronly\n    n = k\nn = 3\n#$spmd ronly\n")
    errors = [g for g in found(leaves) if g[2] == "error"]
    assert [g[:2] for g in errors] == [(8, 1), (9, 1)]
    assert "the ronly region opened at line 6 leaves its block here" in errors[0][3]
    assert (
        "this ronly closes the region opened at line 6, which is indented to column 5"
        in errors[1][3]
    )


def test_warnings():
    text = "x = 1\n#$spmd barrier\nprint(x)\ndef f():\n    print(x)\n# $spmd barrier\n"
    assert [(g[0], g[1], g[2]) for g in found(text)] == [
        (2, 1, "warning"),  # no init
        (2, 1, "warning"),  # no end
        (3, 1, "warning"),  # print outside ronly (not the one inside a function)
        (6, 1, "warning"),  # looks like a directive
    ]


def test_reserved_names_future_imports_and_syntax():
    assert "reserved for the directive runtime" in only(program("spmd = 3\n"))[3]
    assert "reserved" in only(program("for spmd_rows in range(3):\n    pass\n"))[3]
    future = "#$spmd init\nfrom __future__ import annotations\n#$spmd end\n"
    assert "before `from __future__" in only(future)[3]
    assert only(program("x = (\n"))[2:3] == ("error",)
    assert found("a second = 1\n")[0][3].startswith("syntax error")
    assert "a second init" in only(program("#$spmd init\n"))[3]


def test_format_prints_the_line_and_a_caret_under_the_column():
    source = "#$spmd init\nif True:\n\t#$spmd dopr\n\tpass\n#$spmd end\n"
    text = format_all(check(source, "t.py"), "t.py", source)
    assert text.splitlines()[1:] == ["    \t#$spmd dopr", "    \t       ^"]
    assert text.startswith("t.py:3:9: error: unknown clause 'dopr'")
    assert Diagnostic(9, 0, "warning", "w").format("t.py", ["x"]) == "t.py:9:1: warning: w"
