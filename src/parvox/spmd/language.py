"""The ``#$spmd`` directive language: clauses, their arguments and where each was written.

A directive is a comment line whose first text is ``#$spmd`` (any case), followed by clauses
separated by commas; a line that ends with ``,`` continues on the next ``#$spmd`` line. The
clauses are the seed's ``C$SPMD`` table in Python spelling:

==========================  ===============================================================
``init``, ``end``            start / finish the runtime
``barrier``                  every rank waits for the others
``ronly`` ... ``ronly``      the lines between run on the root only
``time!``, ``ttime!``        (with ``ronly``) the root starts or stops ``spmd.time``/``ttime``
``print[text, name]``        the root prints (to stderr)
``dopar`` / ``dopar[a]``     the next ``for`` loop: each rank runs its part of ``a``'s rows
``dodyn[chunk, a]``          the next loop, scheduled dynamically; the root collects ``a``
``pipe[a, n]``, ``[a, n, c]``  the next loop, pipelined down ``a`` (``c``: column chunks)
``r2a[...]``                 root to all: scalars, ``E:a`` entire, ``P:a`` parts, ``P(X=n):a``
``a2r[P: a]``                all to root: the parts of ``a``
``a2a[E: a]``, ``[P(X=n): a]``  all to all: the entire array, or ``n`` neighbour rows
``ror[OP: ...]``, ``roa``    reduction on root / on all; ``OP: IN=a, OUT=b`` for arrays
``tcpus=n``                  the rank count expected (a warning when the job differs)
``ncpus=n`` ... ``ncpus``    the lines between run on the first ``n`` ranks; the rest wait
``parblock`` ... ``parblock``  independent tasks: ``section`` separates them, one rank each
``root_share=f``             (with ``init``) the root takes ``f`` of an equal share of rows
``dodyn[c, a, root_works=False]``  the root only serves the chunks (the seed's strategy B)
==========================  ===============================================================

In argument lists ``;`` separates groups and a prefix (``E:``, ``P:``, ``P(X=n):``, ``SUM:``)
holds for the names after it up to the next prefix or ``;``. Every clause and name keeps its
position, so errors point at the exact column.

Examples
--------
>>> clauses, problems = parse_clauses("ronly, r2a[P(X=1): img; n]", Pos(4, 7))
>>> [c.keyword for c in clauses], problems
(['ronly', 'r2a'], [])
>>> [(i.part, i.halo, i.ref.name, i.ref.pos.col) for i in clauses[1].items]
[('P', 1, 'img', 26), ('scalar', None, 'n', 31)]
"""

from __future__ import annotations

import dataclasses
import keyword
import re
from typing import Literal

from parvox.spmd.diagnostics import Diagnostic

__all__ = [
    "CLAUSES",
    "COLLECTIVE",
    "OPS",
    "Clause",
    "Loop",
    "Plain",
    "Pos",
    "Print",
    "RUNTIME_NAMES",
    "RankCount",
    "Reduction",
    "ReduceItem",
    "RootShare",
    "Ref",
    "Timer",
    "Transfer",
    "TransferItem",
    "Value",
    "parse_clauses",
]

#: Every clause keyword (lower case).
CLAUSES = (
    "init",
    "end",
    "barrier",
    "ronly",
    "time",
    "ttime",
    "print",
    "dopar",
    "dodyn",
    "pipe",
    "r2a",
    "a2r",
    "a2a",
    "ror",
    "roa",
    "tcpus",
    "ncpus",
    "parblock",
    "section",
    "root_share",
)
#: Clauses every rank must reach together (they communicate, split a loop or open a section).
COLLECTIVE = frozenset(CLAUSES) - {"ronly", "time", "ttime", "print", "tcpus", "section"}
#: What a program may read of the runtime (``spmd.time`` in ``print[...]``, for example).
RUNTIME_NAMES = ("rank", "size", "is_root", "mystart", "myend", "mypart", "time", "ttime")
#: Reduction operations of ``ror``/``roa`` and the name :mod:`parvox.reductions` gives each.
OPS = {"SUM": "sum", "PROD": "prod", "MAX": "max", "MIN": "min", "AND": "land", "OR": "lor"}


@dataclasses.dataclass(frozen=True, order=True)
class Pos:
    """A position in the source: 1-based line, 0-based character column."""

    line: int
    col: int

    def shifted(self, by: int) -> Pos:
        """The position ``by`` characters to the right on the same line."""
        return Pos(self.line, self.col + by)


@dataclasses.dataclass(frozen=True)
class Ref:
    """A name written in a clause (``img``, or ``spmd.time`` in ``print``)."""

    name: str
    pos: Pos


#: A count in a clause: an integer literal or the name of an integer scalar.
Value = int | Ref


@dataclasses.dataclass(frozen=True)
class Clause:
    """One clause of a directive: its keyword (lower case) and where it starts."""

    keyword: str
    pos: Pos


@dataclasses.dataclass(frozen=True)
class Plain(Clause):
    """``init``, ``end``, ``barrier`` or ``ronly``."""


@dataclasses.dataclass(frozen=True)
class Timer(Clause):
    """``time!`` or ``ttime!``: the root starts or stops ``spmd.time`` / ``spmd.ttime``."""


@dataclasses.dataclass(frozen=True)
class Print(Clause):
    """``print[...]``: text (``str``) and names (:class:`Ref`) the root prints."""

    items: tuple[str | Ref, ...]


@dataclasses.dataclass(frozen=True)
class Loop(Clause):
    """``dopar``, ``dodyn[chunk, array(, root_works=False)]`` or ``pipe[array, carry(, chunk)]``.

    ``root_works`` (``dodyn`` only): whether the root also runs chunks between serving.
    """

    array: Ref | None
    chunk: Value | None
    carry: Value | None
    root_works: bool = True


@dataclasses.dataclass(frozen=True)
class TransferItem:
    """One name of ``r2a``/``a2r``/``a2a``: a scalar, an entire array or its parts."""

    part: Literal["scalar", "E", "P"]
    halo: Value | None
    cyclic: bool
    ref: Ref
    prefix: Pos | None


@dataclasses.dataclass(frozen=True)
class Transfer(Clause):
    """``r2a[...]``, ``a2r[...]`` or ``a2a[...]``."""

    items: tuple[TransferItem, ...]


@dataclasses.dataclass(frozen=True)
class ReduceItem:
    """Names reduced with one operation, or ``IN=a, OUT=b`` (``into`` is then ``b``)."""

    op: str
    refs: tuple[Ref, ...]
    into: Ref | None
    pos: Pos


@dataclasses.dataclass(frozen=True)
class Reduction(Clause):
    """``ror[...]`` (result on the root) or ``roa[...]`` (on every rank)."""

    items: tuple[ReduceItem, ...]


@dataclasses.dataclass(frozen=True)
class RankCount(Clause):
    """``tcpus=n`` (ranks expected) or ``ncpus=n`` (the section up to ``ncpus`` uses ``n``)."""

    value: int


@dataclasses.dataclass(frozen=True)
class RootShare(Clause):
    """``root_share=f``: the root's part, a fraction ``0 <= f <= 1`` of an equal share."""

    value: float


_CLAUSE = re.compile(r"([A-Za-z_]\w*)(!?)\s*")
_HALO = re.compile(r"P\s*\(\s*(XC|X)\s*=\s*([^)]*?)\s*\)\s*$", re.IGNORECASE)
_OPEN, _CLOSE = "[(", "])"


class _Parser:
    def __init__(self) -> None:
        self.problems: list[Diagnostic] = []

    def error(self, pos: Pos, message: str) -> None:
        self.problems.append(Diagnostic(pos.line, pos.col, "error", message))

    # -- splitting ------------------------------------------------------------------------
    def split(self, text: str, pos: Pos, sep: str) -> list[tuple[str, Pos]]:
        """Split at ``sep`` outside brackets and quotes; each piece stripped, with its position."""
        pieces: list[tuple[str, Pos]] = []
        depth, quote, start = 0, "", 0
        cuts = []
        for k, ch in enumerate(text):
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch in _OPEN:
                depth += 1
            elif ch in _CLOSE:
                depth -= 1
            elif ch == sep and depth <= 0:
                cuts.append(k)
        for stop in [*cuts, len(text)]:  # an unclosed bracket keeps the rest in one piece
            raw = text[start:stop]
            lead = len(raw) - len(raw.lstrip())
            pieces.append((raw.strip(), pos.shifted(start + lead)))
            start = stop + 1
        return pieces

    def name(self, text: str, pos: Pos, what: str, dotted: bool = False) -> Ref | None:
        parts = text.split(".") if dotted else [text]
        if text and all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
            return Ref(text, pos)
        self.error(pos, f"{what} must be a name, got {text!r}" if text else f"{what} is missing")
        return None

    def value(self, text: str, pos: Pos, what: str) -> Value | None:
        if re.fullmatch(r"[+-]?\d+", text):
            number = int(text)
            if number < 0:
                self.error(pos, f"{what} must be >= 0, got {number}")
                return None
            return number
        return self.name(text, pos, f"{what} (an integer or the name of one)")

    # -- clauses --------------------------------------------------------------------------
    def clause(self, text: str, pos: Pos) -> Clause | None:
        if not text:
            self.error(pos, "empty clause (two commas in a row, or a comma at the end)")
            return None
        m = _CLAUSE.match(text)
        if m is None:
            self.error(pos, f"expected a clause name, got {text!r}")
            return None
        word, bang, rest = m.group(1).lower(), m.group(2), text[m.end() :]
        rest_pos = pos.shifted(m.end())
        if word not in CLAUSES:
            self.error(pos, f"unknown clause {m.group(1)!r}; clauses are {', '.join(CLAUSES)}")
            return None
        if bang and word not in ("time", "ttime"):
            self.error(pos.shifted(len(word)), f"'!' belongs to time! and ttime! only, not {word}")
            return None
        if word in ("time", "ttime") and not bang:
            self.error(pos, f"write {word}! (the '!' marks the timer switch)")
            return None
        if word == "ncpus" and not rest:
            return Plain(word, pos)  # the end of an ncpus section
        if word in ("tcpus", "ncpus"):
            return self.rank_count(word, rest, pos, rest_pos)
        if word == "root_share":
            return self.root_share(rest, pos, rest_pos)
        args: tuple[str, Pos] | None = None
        if rest.startswith("["):
            if not rest.endswith("]"):
                self.error(rest_pos, f"{word}[ is not closed by a ']' at the end of the clause")
                return None
            args = (rest[1:-1], rest_pos.shifted(1))
        elif rest.startswith("("):
            self.error(rest_pos, f"write {word}[...] with square brackets")
            return None
        elif rest:
            self.error(rest_pos, f"unexpected {rest!r} after {word}")
            return None
        return self.with_args(word, args, pos)

    def rank_count(self, word: str, rest: str, pos: Pos, rest_pos: Pos) -> Clause | None:
        m = re.fullmatch(r"=\s*(\S*)", rest)
        if m is None or not re.fullmatch(r"\d+", m.group(1)) or int(m.group(1)) < 1:
            self.error(rest_pos if rest else pos, f"write {word}=n with a rank count n >= 1")
            return None
        return RankCount(word, pos, int(m.group(1)))

    def root_share(self, rest: str, pos: Pos, rest_pos: Pos) -> Clause | None:
        m = re.fullmatch(r"=\s*(\S*)", rest)
        try:
            value = float(m.group(1)) if m is not None else -1.0
        except ValueError:
            value = -1.0
        if not 0.0 <= value <= 1.0:
            self.error(
                rest_pos if rest else pos,
                "write root_share=f with a fraction 0 <= f <= 1 of an equal share",
            )
            return None
        return RootShare("root_share", pos, value)

    def with_args(self, word: str, args: tuple[str, Pos] | None, pos: Pos) -> Clause | None:
        takes = {"print", "dopar", "dodyn", "pipe", "r2a", "a2r", "a2a", "ror", "roa"}
        if args is None:
            if word in takes - {"dopar"}:
                self.error(pos, f"{word} needs arguments: {word}[...]")
                return None
            if word == "dopar":
                return Loop(word, pos, None, None, None)
            return Timer(word, pos) if word in ("time", "ttime") else Plain(word, pos)
        if word not in takes:
            self.error(args[1].shifted(-1), f"{word} takes no arguments")
            return None
        text, at = args
        if not text.strip():
            self.error(at.shifted(-1), f"{word}[] names nothing")
            return None
        if word == "print":
            return Print(
                word, pos, tuple(self.print_item(t, p) for t, p in self.split(text, at, ","))
            )
        if word in ("dopar", "dodyn", "pipe"):
            return self.loop(word, pos, self.split(text, at, ","))
        if word in ("ror", "roa"):
            return self.reduction(word, pos, text, at)
        return self.transfer(word, pos, text, at)

    def print_item(self, text: str, pos: Pos) -> str | Ref:
        if len(text) >= 2 and text[0] in "'\"" and text[-1] == text[0]:
            return text[1:-1]
        parts = text.split(".")
        if text and all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
            return Ref(text, pos)
        return text

    def loop(self, word: str, pos: Pos, items: list[tuple[str, Pos]]) -> Clause | None:
        forms = {
            "dopar": "dopar[array]",
            "dodyn": "dodyn[chunk, array] or dodyn[chunk, array, root_works=False]",
            "pipe": "pipe[array, rows] or pipe[array, rows, chunk]",
        }
        counts = {"dopar": (1,), "dodyn": (2, 3), "pipe": (2, 3)}[word]
        if len(items) not in counts:
            self.error(pos, f"write {forms[word]}")
            return None
        if word == "dopar":
            array = self.name(*items[0], "dopar's array")
            return None if array is None else Loop(word, pos, array, None, None)
        if word == "dodyn":
            chunk = self.value(*items[0], "dodyn's chunk")
            array = self.name(*items[1], "dodyn's array")
            if chunk == 0:
                self.error(items[0][1], "dodyn's chunk must be >= 1")
                return None
            works = True
            if len(items) == 3:
                m = re.fullmatch(r"root_works\s*=\s*(True|False)", items[2][0], re.IGNORECASE)
                if m is None:
                    self.error(
                        items[2][1],
                        f"dodyn's third item is root_works=False (the root only serves chunks) "
                        f"or root_works=True, got {items[2][0]!r}",
                    )
                    return None
                works = m.group(1).lower() == "true"
            if chunk is None or array is None:
                return None
            return Loop(word, pos, array, chunk, None, works)
        array = self.name(*items[0], "pipe's array")
        carry = self.value(*items[1], "pipe's row count")
        chunk = self.value(*items[2], "pipe's column chunk") if len(items) == 3 else None
        for value, (_, at) in zip((carry, chunk), items[1:], strict=False):
            if value == 0:
                self.error(at, "must be >= 1")
                return None
        if array is None or carry is None or (len(items) == 3 and chunk is None):
            return None
        return Loop(word, pos, array, chunk, carry)

    def prefixed(self, text: str, pos: Pos) -> tuple[str | None, Pos | None, str, Pos]:
        """Split ``PREFIX: rest`` at the first ``:`` outside brackets."""
        depth = 0
        for k, ch in enumerate(text):
            depth += ch in _OPEN
            depth -= ch in _CLOSE
            if ch == ":" and depth == 0:
                rest = text[k + 1 :]
                lead = len(rest) - len(rest.lstrip())
                return text[:k].strip(), pos, rest.strip(), pos.shifted(k + 1 + lead)
        return None, None, text, pos

    def transfer(self, word: str, pos: Pos, text: str, at: Pos) -> Clause | None:
        items: list[TransferItem] = []
        ok = True
        for group, gpos in self.split(text, at, ";"):
            part: Literal["scalar", "E", "P"] = "scalar"
            halo: Value | None = None
            cyclic = False
            prefix_at: Pos | None = None
            for raw, ipos in self.split(group, gpos, ","):
                prefix, ppos, rest, rpos = self.prefixed(raw, ipos)
                if prefix is not None:
                    assert ppos is not None
                    parsed = self.transfer_prefix(prefix, ppos)
                    if parsed is None:
                        ok = False
                        continue
                    part, halo, cyclic = parsed
                    prefix_at = ppos
                ref = self.name(rest, rpos, f"{word}'s item")
                if ref is None:
                    ok = False
                    continue
                items.append(TransferItem(part, halo, cyclic, ref, prefix_at))
        if not ok:
            return None
        if not items:
            self.error(at, f"{word}[] names nothing")
            return None
        return Transfer(word, pos, tuple(items))

    def transfer_prefix(
        self, prefix: str, pos: Pos
    ) -> tuple[Literal["scalar", "E", "P"], Value | None, bool] | None:
        if prefix.upper() == "E":
            return "E", None, False
        if prefix.upper() == "P":
            return "P", None, False
        m = _HALO.fullmatch(prefix)
        if m is None:
            self.error(pos, f"unknown prefix {prefix!r}; write E:, P:, P(X=n): or P(XC=n):")
            return None
        halo = self.value(m.group(2), pos.shifted(m.start(2)), "the halo width")
        if halo is None:
            return None
        return "P", halo, m.group(1).upper() == "XC"

    def reduction(self, word: str, pos: Pos, text: str, at: Pos) -> Clause | None:
        items: list[ReduceItem] = []
        for group, gpos in self.split(text, at, ";"):
            runs: list[tuple[str, Pos, list[tuple[str, Pos]]]] = []  # (op, where, items)
            for raw, ipos in self.split(group, gpos, ","):
                prefix, ppos, rest, rpos = self.prefixed(raw, ipos)
                if prefix is not None:
                    assert ppos is not None
                    if prefix.upper() not in OPS:
                        self.error(ppos, f"unknown reduction {prefix!r}; use {' '.join(OPS)}")
                        return None
                    runs.append((prefix.upper(), ppos, []))
                elif not runs:
                    self.error(ipos, f"{word} needs an operation first: {word}[SUM: {raw}]")
                    return None
                if rest or prefix is None:
                    runs[-1][2].append((rest, rpos))
            for op, op_pos, names in runs:
                item = self.reduce_item(word, op, op_pos, names)
                if item is None:
                    return None
                items.append(item)
        if not items:
            self.error(at, f"{word}[] names nothing")
            return None
        return Reduction(word, pos, tuple(items))

    def reduce_item(
        self, word: str, op: str, pos: Pos, names: list[tuple[str, Pos]]
    ) -> ReduceItem | None:
        """``OP: a, b`` or ``OP: IN=a, OUT=b``."""
        refs: list[Ref] = []
        inout: dict[str, Ref] = {}
        for text, at in names:
            m = re.fullmatch(r"(IN|OUT)\s*=\s*(.*)", text, re.IGNORECASE)
            key = m.group(1).upper() if m else ""
            ref = (
                self.name(m.group(2), at.shifted(m.start(2)), key)
                if m
                else self.name(text, at, f"{word}'s item")
            )
            if ref is None:
                return None
            if key:
                inout[key] = ref
            else:
                refs.append(ref)
        if inout:
            if set(inout) != {"IN", "OUT"} or refs or len(names) != 2:
                self.error(pos, f"write {word}[{op}: IN=a, OUT=b] with exactly one IN and one OUT")
                return None
            return ReduceItem(op, (inout["IN"],), inout["OUT"], pos)
        if not refs:
            self.error(pos, f"{op}: names nothing to reduce")
            return None
        return ReduceItem(op, tuple(refs), None, pos)


def parse_clauses(text: str, pos: Pos) -> tuple[list[Clause], list[Diagnostic]]:
    """Parse the clauses of one directive (the text after ``#$spmd``, continuations joined).

    Parameters
    ----------
    text : str
        The clause text of one line.
    pos : Pos
        Where ``text`` starts in the source.

    Returns
    -------
    clauses : list of Clause
        The clauses that parsed, left to right.
    problems : list of Diagnostic
        One error per clause that did not.

    Examples
    --------
    >>> clauses, problems = parse_clauses("roa[MAX: hi, MIN: lo], dopr", Pos(3, 7))
    >>> [(i.op, i.refs[0].name) for i in clauses[0].items]
    [('MAX', 'hi'), ('MIN', 'lo')]
    >>> problems[0].col, problems[0].message.split(";")[0]
    (30, "unknown clause 'dopr'")
    """
    parser = _Parser()
    clauses: list[Clause] = []
    for piece, at in parser.split(text, pos, ","):
        clause = parser.clause(piece, at)
        if clause is not None:
            clauses.append(clause)
    return clauses, parser.problems
