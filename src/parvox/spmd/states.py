"""The distribution states of the directive checker: what the ranks hold of one variable.

A :class:`State` says whether the root holds a variable's serial value, how many rows of it
every rank holds around its own part (:data:`FULL`: all of it), whether the neighbour rows
wrap around, and whether each rank holds only its partial result of a parallel loop. States
form a lattice; :func:`meet` is what stays certain when two paths join or two values combine.
:mod:`parvox.spmd.distribution` follows them through a program.

Examples
--------
>>> meet(ENTIRE, State(False, 1)).describe()
"each rank's own rows and 1 row(s) a side"
>>> explain("hi", State(False, None, partial="MAX", origin=Origin("dopar", 7, "hi")))
"each rank's own partial result, computed by the dopar loop of line 7"
"""

from __future__ import annotations

import dataclasses
import sys

from parvox.spmd.language import TransferItem

__all__ = [
    "ENTIRE",
    "FULL",
    "NAMED",
    "Origin",
    "State",
    "explain",
    "meet",
    "shifted",
    "spell",
    "unrow",
]

#: ``State.rows`` of a variable every rank holds whole.
FULL = sys.maxsize
#: ``State.rows`` after a halo whose width is a name (``P(X=h)``): taken as wide enough.
NAMED = 1 << 20


@dataclasses.dataclass(frozen=True)
class Origin:
    """What gave a variable its state: a directive or statement (``what``) at ``line``.

    ``name`` is the variable it concerns (a derived value names its source), ``text`` the
    directive clause as written (``r2a[P: img]``), where there is one.
    """

    what: str
    line: int
    name: str
    text: str = ""


@dataclasses.dataclass(frozen=True)
class State:
    """What the ranks hold of one variable.

    Attributes
    ----------
    root : bool
        The root holds the serial value (all of it).
    rows : int or None
        Every rank holds its own rows along axis 0 current, plus ``rows`` neighbour rows on
        each side (:data:`FULL`: the whole value); None: no such guarantee.
    cyclic : bool
        The neighbour rows wrap around (``P(XC=n)``).
    partial : str or None
        Each rank holds its own partial result of a parallel loop; the reduction it needs
        (``"SUM"``, ``"MAX"``, ...; ``""`` when none fits).
    origin : Origin or None
        Where the state comes from (for messages).
    bound : bool
        Every rank has the name (False: it was first assigned inside ``ronly``, so only the
        root has it).
    """

    root: bool
    rows: int | None
    cyclic: bool = False
    partial: str | None = None
    origin: Origin | None = None
    bound: bool = True

    def describe(self) -> str:
        """The state in words."""
        if not self.bound:
            return "assigned on the root only (the other ranks have no such name)"
        if self.partial is not None:
            return "each rank's own partial result"
        if self.rows == FULL:
            return "the whole value on every rank"
        if self.rows is None:
            return "the whole value on the root only" if self.root else "no current value"
        part = (
            "each rank's own rows"
            if self.rows == 0
            else "each rank's own rows and its named halo"
            if self.rows >= NAMED
            else f"each rank's own rows and {self.rows} row(s) a side"
        )
        return part + (" (and the whole on the root)" if self.root else "")


#: Every rank holds the serial value.
ENTIRE = State(True, FULL)


def _score(s: State) -> tuple[int, int, bool]:
    return (s.partial is None, -1 if s.rows is None else s.rows, s.root)


def meet(a: State, b: State) -> State:
    """What is certain of a value that is ``a`` or ``b`` (or made from both).

    Examples
    --------
    >>> meet(ENTIRE, State(False, 1)).rows, meet(State(True, None), State(False, 0)).root
    (1, False)
    """
    if a == b:
        return a
    weak = a if _score(a) <= _score(b) else b
    bound = a.bound and b.bound
    if a.partial is not None or b.partial is not None:
        op = a.partial if a.partial is not None else b.partial
        if a.partial is not None and b.partial is not None and a.partial != b.partial:
            op = ""
        return State(False, None, False, op, weak.origin, bound)
    rows = None if a.rows is None or b.rows is None else min(a.rows, b.rows)
    cyclic = (a.cyclic or a.rows == FULL) and (b.cyclic or b.rows == FULL) and rows != FULL
    return State(a.root and b.root, rows, cyclic, None, weak.origin, bound)


def unrow(s: State) -> State:
    """A value computed from ``s`` that has no row structure (a sum, one row, ...)."""
    if s.partial is not None or s.rows in (None, FULL):
        return s
    return State(s.root, None, False, None, s.origin, s.bound)


def shifted(s: State, k: int) -> State:
    """Row ``i + k`` of a value in state ``s``, taken for row ``i``: ``|k|`` halo rows fewer.

    Examples
    --------
    >>> shifted(State(False, 2), -1).rows, shifted(State(True, 0), 1).rows
    (1, None)
    """
    if s.partial is not None or s.rows in (None, FULL) or k == 0:
        return s
    rows = s.rows - abs(k) if s.rows is not None and s.rows >= abs(k) else None
    return dataclasses.replace(s, rows=rows, cyclic=s.cyclic and rows is not None)


def explain(name: str, s: State) -> str:
    """Variable ``name`` in state ``s``, in words, with where the state comes from.

    Examples
    --------
    >>> explain("out", State(False, 0, origin=Origin("dopar", 12, "out")))
    "each rank's own rows, computed by the dopar loop of line 12"
    """
    o = s.origin
    said = s.describe()
    if not s.bound and o is not None:
        return f"assigned on the root only, inside the ronly region of line {o.line} (the other ranks have no `{name}`)"
    if o is None:
        return said
    where = {
        "ronly": f"set inside the ronly region of line {o.line}",
        "dopar": f"computed by the dopar loop of line {o.line}",
        "pipe": f"computed by the pipe loop of line {o.line}",
        "dodyn": f"collected on the root by the dodyn loop of line {o.line}",
        "ror": f"reduced on the root only by `#$spmd {o.text}` at line {o.line}",
    }.get(o.what, f"after `{o.text or o.what}` at line {o.line}" if o.text else "")
    src = f"; it comes from {o.name}" if o.name != name else ""
    return f"{said}{', ' + where if where else ''}{src}"


def spell(word: str, item: TransferItem) -> str:
    """A transfer clause's item as the program spells it (``r2a[P(X=1): img]``)."""
    if item.part == "scalar":
        return f"{word}[{item.ref.name}]"
    prefix: str = item.part
    if item.halo is not None:
        h = item.halo if isinstance(item.halo, int) else item.halo.name
        prefix += f"({'XC' if item.cyclic else 'X'}={h})"
    return f"{word}[{prefix}: {item.ref.name}]"
