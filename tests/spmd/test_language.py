"""The clause grammar: every clause form, the prefixes, and errors at their exact columns."""

from __future__ import annotations

import pytest

from parvox.spmd.language import (
    Loop,
    Plain,
    Pos,
    Print,
    RankCount,
    Reduction,
    Ref,
    RootShare,
    Timer,
    Transfer,
    parse_clauses,
)

AT = Pos(5, 7)  # the clause text starts at line 5, column 7 (after "#$spmd ")


def parse(text):
    clauses, problems = parse_clauses(text, AT)
    assert problems == [], problems
    return clauses


def errors(text):
    _, problems = parse_clauses(text, AT)
    return [(p.line, p.col - AT.col, p.message) for p in problems]


def test_simple_clauses_in_any_case():
    got = parse("INIT, barrier, Ronly, end, TIME!, ttime!")
    assert [type(c) for c in got] == [Plain, Plain, Plain, Plain, Timer, Timer]
    assert [c.keyword for c in got] == ["init", "barrier", "ronly", "end", "time", "ttime"]
    assert [c.pos.col - AT.col for c in got] == [0, 6, 15, 22, 27, 34]


def test_loop_clauses():
    dopar, named, dodyn, pipe, tiles = parse(
        "dopar, dopar[out], dodyn[4, image], pipe[s, 2], pipe[s, k, 16]"
    )
    assert dopar == Loop("dopar", Pos(5, 7), None, None, None)
    assert named.array == Ref("out", Pos(5, 7 + 13))
    assert (dodyn.chunk, dodyn.array.name) == (4, "image")
    assert (pipe.array.name, pipe.carry, pipe.chunk) == ("s", 2, None)
    assert (tiles.carry, tiles.chunk) == (Ref("k", Pos(5, 7 + 56)), 16)


def test_transfer_prefixes_hold_until_the_next_prefix_or_semicolon():
    (r2a,) = parse("r2a[a, b; P: c, d; E:e, P(X=2): f, P( xc = k ):g; h]")
    assert isinstance(r2a, Transfer)
    got = [(i.part, i.halo, i.cyclic, i.ref.name) for i in r2a.items]
    assert got == [
        ("scalar", None, False, "a"),
        ("scalar", None, False, "b"),
        ("P", None, False, "c"),
        ("P", None, False, "d"),
        ("E", None, False, "e"),
        ("P", 2, False, "f"),
        ("P", Ref("k", Pos(5, 7 + 43)), True, "g"),
        ("scalar", None, False, "h"),
    ]
    assert [i.ref.pos.col - AT.col for i in r2a.items] == [4, 7, 13, 16, 21, 32, 47, 50]


def test_reductions_with_names_and_in_out():
    (ror,) = parse("ror[MAX: hi, MIN: lo, lo2; sum: IN=h, OUT=g; AND: ok]")
    assert isinstance(ror, Reduction)
    got = [(i.op, [r.name for r in i.refs], i.into and i.into.name) for i in ror.items]
    assert got == [
        ("MAX", ["hi"], None),
        ("MIN", ["lo", "lo2"], None),
        ("SUM", ["h"], "g"),
        ("AND", ["ok"], None),
    ]


def test_print_takes_text_and_names():
    (p,) = parse("print[Code block took:, spmd.time, 'a, b', \"s\", n]")
    assert isinstance(p, Print)
    assert p.items == (
        "Code block took:",
        Ref("spmd.time", Pos(5, 7 + 24)),
        "a, b",
        "s",
        Ref("n", Pos(5, 7 + 48)),
    )


def test_rank_counts():
    assert parse("tcpus=4, ncpus = 2") == [
        RankCount("tcpus", Pos(5, 7), 4),
        RankCount("ncpus", Pos(5, 16), 2),
    ]


@pytest.mark.parametrize(
    ("text", "col", "words"),
    [
        ("dopr", 0, "unknown clause 'dopr'"),
        ("init, , end", 6, "empty clause"),
        ("time", 0, "write time!"),
        ("ronly!", 5, "'!' belongs to time! and ttime! only"),
        ("r2a(P: a)", 3, "square brackets"),
        ("r2a[P: a", 3, "not closed"),
        ("barrier[x]", 7, "takes no arguments"),
        ("r2a", 0, "needs arguments"),
        ("r2a[]", 3, "names nothing"),
        ("r2a[Q: a]", 4, "unknown prefix 'Q'"),
        ("a2a[P(X=-1): a]", 8, "must be >= 0"),
        ("a2a[P(Y=1): a]", 4, "unknown prefix"),
        ("r2a[P: 3a]", 7, "must be a name, got '3a'"),
        ("r2a[P: for]", 7, "must be a name, got 'for'"),
        ("ror[a]", 4, "needs an operation first"),
        ("roa[AVG: a]", 4, "unknown reduction 'AVG'"),
        ("roa[SUM: IN=a]", 4, "exactly one IN and one OUT"),
        ("roa[SUM: IN=a, OUT=b, c]", 4, "exactly one IN and one OUT"),
        ("roa[SUM: ]", 4, "names nothing to reduce"),
        ("dodyn[a]", 0, "write dodyn[chunk, array]"),
        ("dodyn[0, a]", 6, "chunk must be >= 1"),
        ("dodyn[x y, a]", 6, "an integer or the name of one"),
        ("pipe[a]", 0, "write pipe[array, rows]"),
        ("pipe[a, 0]", 8, "must be >= 1"),
        ("dopar[a, b]", 0, "write dopar[array]"),
        ("tcpus=0", 5, "tcpus=n with a rank count n >= 1"),
        ("ncpus=0", 5, "ncpus=n with a rank count n >= 1"),
        ("ncpus=x", 5, "ncpus=n with a rank count n >= 1"),
        ("root_share=1.5", 10, "root_share=f with a fraction 0 <= f <= 1"),
        ("root_share", 0, "root_share=f"),
        ("dodyn[2, a, root_works=maybe]", 12, "root_works=False"),
        ("dodyn[2, a, b, c]", 0, "dodyn[chunk, array, root_works=False]"),
        ("init extra", 5, "unexpected 'extra' after init"),
        ("$$", 0, "expected a clause name"),
    ],
)
def test_errors_point_at_the_offending_text(text, col, words):
    found = errors(text)
    assert len(found) == 1, found
    line, got_col, message = found[0]
    assert (line, got_col) == (5, col), message
    assert words in message


def test_the_seed_mechanisms_parse():
    share, ncpus, close, par, sec, dyn = (
        parse_clauses(t, AT)[0][0]
        for t in (
            "root_share=0.5",
            "ncpus=2",
            "ncpus",
            "parblock",
            "section",
            "dodyn[4, img, root_works=False]",
        )
    )
    assert share == RootShare("root_share", AT, 0.5)
    assert ncpus == RankCount("ncpus", AT, 2)
    assert (type(close).__name__, close.keyword) == ("Plain", "ncpus")
    assert [par.keyword, sec.keyword] == ["parblock", "section"]
    assert isinstance(dyn, Loop) and dyn.root_works is False and dyn.chunk == 4
    assert parse_clauses("dodyn[4, img]", AT)[0][0].root_works is True


def test_good_clauses_survive_a_bad_one():
    clauses, problems = parse_clauses("init, dopr, barrier", AT)
    assert [c.keyword for c in clauses] == ["init", "barrier"]
    assert len(problems) == 1
