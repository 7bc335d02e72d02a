"""Which part of each variable each rank holds, directive by directive: the checker's data flow.

A ``#$spmd`` program promises the serial result at any rank count. That holds only when every
rank reads data it actually holds: a ``dopar`` loop reading ``img[i - 1]`` needs the row above
its part (``r2a[P(X=1): img]``), a ``ronly`` region printing ``out`` needs the parts gathered
(``a2r[P: out]``), a scalar accumulated in a parallel loop needs its reduction (``roa``).
:func:`distribution_problems` interprets the program's statements in order (branches merged,
loops to a fixed point) and follows, for every variable, a :class:`State`:

============================  =============================================================
entire                         every rank holds the serial value (``np.zeros``, ``r2a[E:]``)
root only                      the root does (set inside ``ronly``, ``ror``, ``dodyn``)
parts                          each rank its own rows (after a ``dopar`` write, ``r2a[P:]``)
parts + halo(n)                its rows and ``n`` rows a side (``P(X=n)``, cyclic with XC)
gathered                       parts everywhere and the whole on the root (after ``a2r``)
partial (op)                   each rank its own partial result of a parallel loop
============================  =============================================================

Each read is checked against the state: inside a parallel loop over ``i``, ``a[i + k]`` needs
``|k|`` halo rows (or the entire array); a read inside ``ronly`` needs the root's value; a
partial result needs its reduction first. A mistake is an error naming the directive to add;
an index the checker cannot follow (``a[idx[i]]``) is a note suggesting
``parvox spmd run --verify``.

Examples
--------
>>> from parvox.spmd import check
>>> program = '''#$spmd init
... import numpy as np
... img = np.zeros((9, 4))
... #$spmd ronly
... img[...] = 1.0
... #$spmd ronly, r2a[P: img]
... out = np.zeros_like(img)
... #$spmd dopar
... for i in range(1, 8):
...     out[i] = img[i - 1] + img[i + 1]
... #$spmd a2r[P: out], end
... '''
>>> print([d.message for d in check(program, "p.py")][0])
`img[i - 1]` reads 1 row(s) beyond each rank's part, but `r2a[P: img]` (line 6) sends no neighbour rows: write `r2a[P(X=1): img]` there
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from parvox.spmd.diagnostics import Diagnostic, Severity
from parvox.spmd.language import Loop, Reduction, Timer, Transfer, TransferItem

if TYPE_CHECKING:
    from parvox.spmd.checker import LoopPlan, Placement
    from parvox.spmd.source import Source

__all__ = ["ENTIRE", "FULL", "Origin", "State", "distribution_problems", "meet"]

#: ``State.rows`` of a variable every rank holds whole.
FULL = sys.maxsize


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
    """

    root: bool
    rows: int | None
    cyclic: bool = False
    partial: str | None = None
    origin: Origin | None = None

    def describe(self) -> str:
        """The state in words."""
        if self.partial is not None:
            return "each rank's own partial result"
        if self.rows == FULL:
            return "the whole value on every rank"
        if self.rows is None:
            return "the whole value on the root only" if self.root else "no current value"
        part = "each rank's own rows" if self.rows == 0 else (
            f"each rank's own rows and {self.rows} row(s) a side"
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
    if a.partial is not None or b.partial is not None:
        op = a.partial if a.partial is not None else b.partial
        if a.partial is not None and b.partial is not None and a.partial != b.partial:
            op = ""
        return State(False, None, False, op, weak.origin)
    rows = None if a.rows is None or b.rows is None else min(a.rows, b.rows)
    cyclic = (a.cyclic or a.rows == FULL) and (b.cyclic or b.rows == FULL) and rows != FULL
    return State(a.root and b.root, rows, cyclic, None, weak.origin)


def _unrow(s: State) -> State:
    """A value computed from ``s`` that has no row structure (a sum, one row, ...)."""
    if s.partial is not None or s.rows in (None, FULL):
        return s
    return State(s.root, None, False, None, s.origin)


_SHAPE_ATTRS = frozenset({"shape", "dtype", "ndim", "size", "itemsize", "nbytes"})
_LIKE = frozenset({"len", "zeros_like", "ones_like", "empty_like", "full_like", "shape", "ndim"})
_REDUCERS = frozenset(
    {
        "sum", "mean", "max", "min", "amax", "amin", "std", "var", "prod", "median", "any",
        "all", "average", "count_nonzero", "nanmax", "nanmin", "nansum", "nanmean", "ptp",
        "percentile", "quantile", "histogram", "bincount", "unique", "dot", "vdot", "norm",
        "argmax", "argmin", "item", "tolist", "tobytes", "float", "int", "bool", "round",
    }
)
_MUTATORS = frozenset(
    {"append", "extend", "add", "update", "insert", "fill", "sort", "pop", "remove", "clear"}
)
_AUG = {ast.Add: "SUM", ast.Sub: "SUM", ast.Mult: "PROD", ast.BitOr: "OR", ast.BitAnd: "AND"}


def _first_index(node: ast.Subscript) -> ast.expr:
    s = node.slice
    return s.elts[0] if isinstance(s, ast.Tuple) and s.elts else s


def _full(index: ast.expr) -> bool:
    if isinstance(index, ast.Constant) and index.value is Ellipsis:
        return True
    return isinstance(index, ast.Slice) and not (index.lower or index.upper or index.step)


def _offset(index: ast.expr | None, var: str) -> int | None:
    """``k`` when ``index`` is ``var + k`` (``var``, ``var - 1``, ``2 + var``), else None."""
    if isinstance(index, ast.Name) and index.id == var:
        return 0
    if isinstance(index, ast.BinOp) and isinstance(index.op, ast.Add | ast.Sub):
        left, right = index.left, index.right
        if (
            isinstance(left, ast.Name)
            and left.id == var
            and isinstance(right, ast.Constant)
            and type(right.value) is int
        ):
            return right.value if isinstance(index.op, ast.Add) else -right.value
        if (
            isinstance(index.op, ast.Add)
            and isinstance(right, ast.Name)
            and right.id == var
            and isinstance(left, ast.Constant)
            and type(left.value) is int
        ):
            return left.value
    return None


def _wraps(index: ast.expr | None, var: str) -> bool:
    """Whether ``index`` is ``(var + k) % n``: a neighbour row taken cyclically."""
    return (
        isinstance(index, ast.BinOp)
        and isinstance(index.op, ast.Mod)
        and _offset(index.left, var) is not None
    )


def _reach(index: ast.expr, var: str) -> tuple[int, int] | None:
    """The rows ``var + lo .. var + hi`` an index reads, when the checker can tell."""
    if _wraps(index, var):
        assert isinstance(index, ast.BinOp)
        index = index.left
    k = _offset(index, var)
    if k is not None:
        return k, k
    if isinstance(index, ast.Slice) and not index.step and index.lower and index.upper:
        lo, hi = _offset(index.lower, var), _offset(index.upper, var)
        if lo is not None and hi is not None and hi > lo:
            return lo, hi - 1
    return None


def _mentions(node: ast.AST, var: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(node))


def _bound(body: Sequence[ast.stmt]) -> set[str]:
    """Names a block binds as plain names (assignments, loop targets, ``with ... as``...)."""
    out: set[str] = set()
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
                out.add(n.id)
            elif isinstance(n, ast.alias):
                out.add((n.asname or n.name).split(".")[0])
            elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.add(n.name)
    return out


def _uses(expr: ast.AST) -> Iterator[tuple[ast.Name, ast.Subscript | None]]:
    """Every read of a name with the subscript it is read through; shape-only reads skipped."""
    skip: set[int] = set()
    for n in ast.walk(expr):
        if isinstance(n, ast.Attribute) and n.attr in _SHAPE_ATTRS:
            skip.add(id(n.value))
        elif isinstance(n, ast.Call) and n.args and _callee(n) in _LIKE:
            skip.add(id(n.args[0]))
        elif isinstance(n, ast.Lambda | ast.FunctionDef):
            skip.update(id(x) for x in ast.walk(n))
    for n in ast.walk(expr):
        if isinstance(n, ast.Assign | ast.AnnAssign):  # a plain write reads no element
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Subscript | ast.Attribute) and isinstance(t.value, ast.Name):
                    skip.add(id(t.value))
    subs: dict[int, ast.Subscript] = {}
    for n in ast.walk(expr):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
            subs[id(n.value)] = n
            if id(n) in skip:
                skip.add(id(n.value))
    for n in ast.walk(expr):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in skip:
            yield n, subs.get(id(n))


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _has_axis(call: ast.Call) -> bool:
    for kw in call.keywords:
        if kw.arg == "axis":
            v = kw.value
            return not (isinstance(v, ast.Constant) and v.value in (0, None))
    if isinstance(call.func, ast.Attribute) and call.args:
        a = call.args[0]
        return not (isinstance(a, ast.Constant) and a.value in (0, None))
    return False


def _accumulation(stmt: ast.stmt, name: str) -> str:
    """The reduction a statement that updates ``name`` in a parallel loop looks like."""
    if isinstance(stmt, ast.AugAssign):
        return _AUG.get(type(stmt.op), "")
    value = getattr(stmt, "value", None)
    if isinstance(value, ast.Call) and _callee(value) in ("max", "min", "maximum", "minimum"):
        if any(isinstance(a, ast.Name) and a.id == name for a in value.args):
            return "MAX" if "max" in _callee(value) else "MIN"
    if isinstance(value, ast.BinOp) and isinstance(value.left, ast.Name) and value.left.id == name:
        return _AUG.get(type(value.op), "")
    if isinstance(value, ast.BoolOp) and any(
        isinstance(v, ast.Name) and v.id == name for v in value.values
    ):
        return "OR" if isinstance(value.op, ast.Or) else "AND"
    return ""


class _Flow:
    def __init__(self, src: Source, placements: Sequence[Placement]) -> None:
        self.src = src
        self.placements = sorted(placements, key=lambda p: p.directive.lines[0])
        self.plans: dict[int, tuple[LoopPlan, int]] = {
            id(p.loop.node): (p.loop, p.directive.pos.line)
            for p in placements
            if p.loop is not None
        }
        self.state: dict[str, State] = {}
        self.problems: dict[tuple[str, int, str], Diagnostic] = {}
        self.report = True
        tree = src.tree
        assert tree is not None
        self.arrays = {
            n.value.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
        }
        for p in placements:
            for c in p.directive.clauses:
                if isinstance(c, Transfer):
                    self.arrays.update(i.ref.name for i in c.items if i.part != "scalar")

    # -- reporting ----------------------------------------------------------------------
    def say(
        self, node: ast.AST | tuple[int, int], key: tuple[str, int], message: str,
        severity: Severity = "error",
    ) -> None:
        if not self.report:
            return
        if isinstance(node, tuple):
            line, col = node
        else:
            line = node.lineno  # type: ignore[attr-defined]
            text = self.src.lines[line - 1].encode()
            col = len(text[: node.col_offset].decode(errors="replace"))  # type: ignore[attr-defined]
        self.problems.setdefault((*key, severity), Diagnostic(line, col, severity, message))

    def text(self, node: ast.AST) -> str:
        return ast.unparse(node)

    def get(self, name: str) -> State:
        return self.state.get(name, ENTIRE)

    def set(self, name: str, s: State) -> None:
        self.state[name] = s

    # -- values -------------------------------------------------------------------------
    def value(self, e: ast.AST | None) -> State:
        """The state of an expression evaluated on every rank (or on the root)."""
        if e is None or isinstance(e, ast.Constant):
            return ENTIRE
        if isinstance(e, ast.Name):
            return self.get(e.id)
        if isinstance(e, ast.Attribute):
            return ENTIRE if e.attr in _SHAPE_ATTRS else self.value(e.value)
        if isinstance(e, ast.Subscript):
            base = self.value(e.value)
            index = meet(self.value(e.slice), ENTIRE)
            first = _first_index(e)
            if _full(first):
                return meet(base, index)
            if (
                isinstance(first, ast.Constant)
                and first.value == 0
                and base.partial is None
                and base.rows is not None
            ):
                base = State(True, None, origin=base.origin) if base.rows != FULL else base
            return meet(_unrow(base), _unrow(index))
        if isinstance(e, ast.Call):
            name = _callee(e)
            args = [*e.args, *(k.value for k in e.keywords)]
            if name in _LIKE and e.args:
                args = args[1:]
            s = self.value(e.func.value) if isinstance(e.func, ast.Attribute) else ENTIRE
            for a in args:
                s = meet(s, self.value(a))
            return _unrow(s) if name in _REDUCERS and not _has_axis(e) else s
        if isinstance(e, ast.Lambda):
            return ENTIRE
        s = ENTIRE
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr | ast.comprehension):
                s = meet(s, self.value(child))
        return s

    # -- blocks -------------------------------------------------------------------------
    def indent_of(self, stmt: ast.stmt) -> str:
        line = self.src.lines[stmt.lineno - 1]
        return line[: len(line) - len(line.lstrip())]

    def block(self, body: Sequence[ast.stmt], lo: int, hi: int, mode: str) -> None:
        if not body:
            return
        indent = self.indent_of(body[0])
        mine = [
            p
            for p in self.placements
            if lo < p.directive.lines[0] < hi and p.indent == indent
            and not any(s.lineno <= p.directive.lines[0] <= (s.end_lineno or s.lineno)
                        for s in body)
        ]
        region: tuple[str, int] | None = None
        k = 0
        for i, stmt in enumerate(body):
            while k < len(mine) and mine[k].directive.lines[0] < stmt.lineno:
                mode, region = self.directive(mine[k], mode, region)
                k += 1
            nxt = body[i + 1].lineno if i + 1 < len(body) else hi
            self.stmt(stmt, mode, nxt, region)
        while k < len(mine):
            mode, region = self.directive(mine[k], mode, region)
            k += 1

    def directive(
        self, p: Placement, mode: str, region: tuple[str, int] | None
    ) -> tuple[str, tuple[str, int] | None]:
        d = p.directive
        timer = any(isinstance(c, Timer) for c in d.clauses)
        for c in d.clauses:
            if c.keyword == "ronly":
                if region is not None:
                    mode, region = region[0], None
                elif not timer:
                    region = (mode, d.pos.line)
                    mode = "root"
                continue
            if mode != "all":
                continue
            if isinstance(c, Transfer):
                for item in c.items:
                    self.transfer(c.keyword, item, d.pos.line)
            elif isinstance(c, Reduction):
                for r in c.items:
                    origin_word = c.keyword
                    after = ENTIRE if origin_word == "roa" else State(True, None)
                    for ref in (r.into,) if r.into is not None else r.refs:
                        o = Origin(origin_word, d.pos.line, ref.name, f"{origin_word}[{r.op}: ...]")
                        self.set(ref.name, dataclasses.replace(after, origin=o))
        return mode, region

    def transfer(self, word: str, item: TransferItem, line: int) -> None:
        name, at = item.ref.name, (item.ref.pos.line, item.ref.pos.col)
        s = self.get(name)
        spelled = self.spell(word, item)
        key = (name, line)
        halo = item.halo if isinstance(item.halo, int) else (0 if item.halo is None else 1)
        if word == "r2a" and not s.root:
            fix = self.fix_for(name, s, line)
            self.say(
                at, key,
                f"`{spelled}` sends the root's {name}, but the root does not hold it whole here "
                f"({self.why(name, s)}){fix}",
            )
        if word in ("a2r", "a2a") and (s.rows is None or s.partial is not None):
            if s.partial is not None:
                how = f"reduce it with `#$spmd ror[{s.partial or 'SUM'}: {name}]` instead"
            elif s.root:
                how = (
                    f"the other ranks' parts are stale, so `{spelled}` would overwrite the root's "
                    f"rows with them; send it from the root with `#$spmd r2a[P: {name}]` "
                    f"(or r2a[E: {name}]) instead"
                )
            else:
                how = "no rank holds its part"
            self.say(at, key, f"`{name}` is {self.why(name, s)}: {how}")
        o = Origin(word, line, name, spelled)
        if word == "r2a":
            rows = FULL if item.part in ("E", "scalar") else halo
            self.set(name, State(True, rows, item.cyclic and rows != FULL, None, o))
        elif word == "a2r":
            self.set(name, State(True, s.rows if s.rows is not None else 0, s.cyclic, None, o))
        elif item.part == "E":
            self.set(name, State(True, FULL, False, None, o))
        else:
            rows = max(halo, s.rows or 0)
            self.set(name, State(s.root, rows, item.cyclic or s.cyclic, None, o))

    @staticmethod
    def spell(word: str, item: TransferItem) -> str:
        if item.part == "scalar":
            return f"{word}[{item.ref.name}]"
        prefix = item.part
        if item.halo is not None:
            h = item.halo if isinstance(item.halo, int) else item.halo.name
            prefix += f"({'XC' if item.cyclic else 'X'}={h})"
        return f"{word}[{prefix}: {item.ref.name}]"

    def why(self, name: str, s: State) -> str:
        o = s.origin
        said = s.describe()
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

    def fix_for(self, name: str, s: State, line: int) -> str:
        cause = s.origin.name if s.origin is not None else name
        if s.partial is not None:
            return f": reduce it first with `#$spmd ror[{s.partial or 'SUM'}: {cause}]` before line {line}"
        if s.rows is not None:
            return f": gather it first with `#$spmd a2r[P: {cause}]` before line {line}"
        return ""

    # -- statements ---------------------------------------------------------------------
    def stmt(self, s: ast.stmt, mode: str, hi: int, region: tuple[str, int] | None) -> None:
        if isinstance(s, ast.For) and id(s) in self.plans and mode == "all":
            plan, line = self.plans[id(s)]
            self.parallel(s, plan, line)
            return
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
            saved, self.state = self.state, {}
            self.block(s.body, s.lineno, hi, "all")
            self.state = saved
            self.state.pop(s.name, None)
            return
        if isinstance(s, ast.ClassDef):
            self.state.pop(s.name, None)
            return
        if mode == "root":
            self.root_reads(s, region)
        if isinstance(s, ast.For | ast.AsyncFor | ast.While):
            if isinstance(s, ast.For | ast.AsyncFor):
                it = self.value(s.iter)
                for n in ast.walk(s.target):
                    if isinstance(n, ast.Name):
                        self.set(n.id, _unrow(it) if mode == "all" else self.rooted(it, n.id, region))
            stop = s.orelse[0].lineno if s.orelse else hi
            self.fixpoint(s.body, s.lineno, stop, mode)
            self.block(s.orelse, s.lineno, hi, mode)
            return
        if isinstance(s, ast.If):
            before = dict(self.state)
            stop = s.orelse[0].lineno if s.orelse else hi
            self.block(s.body, s.lineno, stop, mode)
            after_body, self.state = self.state, before
            self.block(s.orelse, s.lineno, hi, mode)
            self.state = self.merge(after_body, self.state)
            return
        if isinstance(s, ast.With | ast.AsyncWith):
            for item in s.items:
                if item.optional_vars is not None:
                    for n in ast.walk(item.optional_vars):
                        if isinstance(n, ast.Name):
                            self.state.pop(n.id, None)
            self.block(s.body, s.lineno, hi, mode)
            return
        if isinstance(s, ast.Try):
            self.block(s.body, s.lineno, s.handlers[0].lineno if s.handlers else hi, mode)
            for h in s.handlers:
                self.block(h.body, h.lineno, hi, mode)
            self.block(s.orelse, s.lineno, hi, mode)
            self.block(s.finalbody, s.lineno, hi, mode)
            return
        if isinstance(s, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if s.value is None:
                return
            for t in targets:
                if (
                    isinstance(t, ast.Tuple | ast.List)
                    and isinstance(s.value, ast.Tuple | ast.List)
                    and len(t.elts) == len(s.value.elts)
                ):
                    values = [self.value(v) for v in s.value.elts]
                    for tt, v in zip(t.elts, values, strict=True):
                        self.assign(tt, v, mode, region, aug=False)
                else:
                    self.assign(t, self.value(s.value), mode, region,
                                aug=isinstance(s, ast.AugAssign))
            return
        if isinstance(s, ast.Import | ast.ImportFrom | ast.Global | ast.Nonlocal):
            for n in _bound([s]):
                self.state.pop(n, None)
            return
        if isinstance(s, ast.Delete):
            for n in _bound([s]):
                self.state.pop(n, None)
            return
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            f = s.value.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (
                f.attr in _MUTATORS and f.value.id in self.state
            ):
                v = self.value(s.value)
                self.assign(f.value, v, mode, region, aug=True)

    def rooted(self, v: State, name: str, region: tuple[str, int] | None) -> State:
        o = Origin("ronly", region[1] if region else 0, name)
        return State(v.root, None, False, v.partial, o if v.root else v.origin)

    def assign(
        self, t: ast.expr, v: State, mode: str, region: tuple[str, int] | None, aug: bool
    ) -> None:
        if isinstance(t, ast.Starred):
            t = t.value
        if isinstance(t, ast.Tuple | ast.List):
            for e in t.elts:
                self.assign(e, _unrow(v), mode, region, aug)
            return
        if isinstance(t, ast.Name):
            new = meet(self.get(t.id), v) if aug else v
            self.set(t.id, self.rooted(new, t.id, region) if mode == "root" else new)
            return
        if isinstance(t, ast.Subscript | ast.Attribute):
            base = t.value
            while isinstance(base, ast.Subscript | ast.Attribute):
                base = base.value
            if not isinstance(base, ast.Name):
                return
            old = self.get(base.id)
            whole = (
                isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name)
                and all(
                    _full(i)
                    for i in (t.slice.elts if isinstance(t.slice, ast.Tuple) else [t.slice])
                )
                and not aug
            )
            if isinstance(t, ast.Subscript) and not _full(_first_index(t)):
                v = meet(_unrow(v), _unrow(self.value(t.slice)))
            new = v if whole else meet(old, v)
            if mode == "root":
                root = v.root if whole else old.root and v.root
                o = Origin("ronly", region[1] if region else 0, base.id)
                new = State(root, None, False, new.partial, o if root else new.origin)
            self.set(base.id, new)

    def merge(self, a: dict[str, State], b: dict[str, State]) -> dict[str, State]:
        out = dict(a)
        for k, v in b.items():
            out[k] = meet(out[k], v) if k in out else v
        return out

    def fixpoint(self, body: Sequence[ast.stmt], lo: int, hi: int, mode: str) -> None:
        report = self.report
        self.report = False
        entry = dict(self.state)
        for _ in range(12):
            self.state = dict(entry)
            self.block(body, lo, hi, mode)
            merged = self.merge(entry, self.state)
            if merged == entry:
                break
            entry = merged
        self.report = report
        self.state = dict(entry)
        self.block(body, lo, hi, mode)
        self.state = self.merge(entry, self.state)

    # -- reads on the root ----------------------------------------------------------------
    def root_reads(self, s: ast.stmt, region: tuple[str, int] | None) -> None:
        parts: list[ast.AST] = []
        if isinstance(s, ast.For | ast.AsyncFor):
            parts = [s.iter]
        elif isinstance(s, ast.While | ast.If):
            parts = [s.test]
        elif isinstance(s, ast.With | ast.AsyncWith):
            parts = [i.context_expr for i in s.items]
        elif isinstance(s, ast.Assign | ast.AnnAssign | ast.AugAssign):
            parts = [s.value] if s.value is not None else []
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                if isinstance(t, ast.Subscript):
                    parts.append(t.slice)
                if isinstance(s, ast.AugAssign):
                    parts.append(t)
        elif not isinstance(s, ast.Try):
            parts = [s]
        line = region[1] if region else s.lineno
        for part in parts:
            for name, _sub in _uses(part):
                st = self.state.get(name.id)
                if st is None or st.root:
                    continue
                if st.partial is not None:
                    op = st.partial or "SUM"
                    cause = st.origin.name if st.origin else name.id
                    fix = f"combine it on the root with `#$spmd ror[{op}: {cause}]` before line {line}"
                    if not st.partial:
                        fix = (
                            f"its value differs from rank to rank; set it outside the parallel "
                            f"loop, or combine it with `#$spmd ror[OP: {cause}]` before line {line}"
                        )
                elif st.rows is not None:
                    cause = st.origin.name if st.origin else name.id
                    fix = f"gather it on the root with `#$spmd a2r[P: {cause}]` before line {line}"
                else:
                    fix = "no rank holds its serial value"
                self.say(
                    name, (name.id, line),
                    f"the root reads `{name.id}` here, but it is {self.why(name.id, st)}: {fix}",
                )

    # -- parallel loops ---------------------------------------------------------------
    def parallel(self, node: ast.For, plan: LoopPlan, line: int) -> None:
        word = plan.clause.keyword
        assert isinstance(node.target, ast.Name)
        var = node.target.id
        self.value(node.iter)
        local = _bound(node.body) | {var}
        start = None
        it = node.iter
        if isinstance(it, ast.Call) and len(it.args) >= 2 and isinstance(it.args[0], ast.Constant):
            start = it.args[0].value if type(it.args[0].value) is int else None
        elif isinstance(it, ast.Call) and len(it.args) == 1:
            start = 0
        written: dict[str, str] = {}  # name -> "rows" or a reduction op ("" unknown)
        row_written: set[str] = set()
        for stmt in node.body:
            for n in ast.walk(stmt):
                targets: list[ast.expr] = []
                if isinstance(n, ast.Assign):
                    targets = list(n.targets)
                elif isinstance(n, ast.AugAssign | ast.AnnAssign):
                    targets = [n.target]
                for t in targets:
                    for e in ast.walk(t):
                        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name):
                            k = _offset(_first_index(e), var)
                            if k == 0:
                                row_written.add(e.value.id)
                            elif k is not None:
                                self.say(
                                    e, (e.value.id, line),
                                    f"`{self.text(e)} = ...` writes a row of another rank's part: "
                                    f"each rank runs the iterations of its own rows of the {word} "
                                    f"loop of line {line}; write {e.value.id}[{var}, ...] (shift "
                                    f"the loop range instead)",
                                )
                            elif e.value.id not in local:
                                op = _AUG.get(type(n.op), "") if isinstance(n, ast.AugAssign) else ""
                                written.setdefault(e.value.id, op)
                        elif isinstance(e, ast.Name) and isinstance(e.ctx, ast.Store):
                            op = _accumulation(n, e.id) if isinstance(n, ast.stmt) else ""
                            if e.id in written and written[e.id] != op:
                                op = ""
                            written[e.id] = op
                if (
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and isinstance(n.func.value, ast.Name)
                    and n.func.attr in _MUTATORS
                    and n.func.value.id in self.state
                    and n.func.value.id not in local
                ):
                    written.setdefault(n.func.value.id, "")
        uses = sorted(
            (
                (name, sub)
                for stmt in node.body
                for name, sub in _uses(stmt)
                if name.id not in local and name.id in self.state
            ),
            key=lambda u: (u[0].lineno, u[0].col_offset),
        )
        self.needs: dict[str, int] = {}
        for name, sub in uses:
            reach = _reach(_first_index(sub), var) if sub is not None else None
            if reach is not None:
                need = max(-reach[0], reach[1], 0)
                self.needs[name.id] = max(need, self.needs.get(name.id, 0))
        for name, sub in uses:
            self.loop_read(word, plan, name, sub, var, line, start, row_written)
        origin_rows = Origin(word, line, "")
        for name in row_written:
            if word == "dodyn" and name == plan.arrays[0]:
                self.set(name, State(True, None, origin=dataclasses.replace(origin_rows, name=name)))
            elif word == "dodyn":
                self.set(name, State(False, None, origin=dataclasses.replace(origin_rows, name=name)))
            else:
                self.set(name, State(False, 0, origin=dataclasses.replace(origin_rows, name=name)))
        for name, op in written.items():
            if name not in row_written:
                o = Origin(word, line, name)
                self.set(name, State(False, None, False, op, o))

    def loop_read(
        self, word: str, plan: LoopPlan, name: ast.Name, sub: ast.Subscript | None, var: str,
        line: int, start: int | None, row_written: set[str],
    ) -> None:
        n = name.id
        st = self.state[n]
        key = (n, line)
        first = _first_index(sub) if sub is not None else None
        reach = _reach(first, var) if first is not None else None
        if n in row_written and reach is not None:
            if word == "pipe" and n == plan.arrays[0]:
                return
            if reach == (0, 0):
                return
            if word == "dopar" and reach[0] < 0:
                assert sub is not None
                self.say(
                    sub, key,
                    f"`{self.text(sub)}` reads a row that an earlier iteration of this dopar loop "
                    f"writes: the iterations depend on each other, which dopar cannot split; use "
                    f"`#$spmd pipe[{n}, {-reach[0]}]` at line {line}",
                )
                return
        if st.rows == FULL and st.partial is None:
            return
        what = self.text(sub) if sub is not None else n
        is_array = n in self.arrays
        if st.partial is not None:
            op = st.partial or "SUM"
            fix = f"combine the ranks' results with `#$spmd roa[{op}: {st.origin.name if st.origin else n}]` before line {line}"
            if not st.partial:
                fix = "its value differs from rank to rank; set it outside the parallel loop or reduce it with roa"
            self.say(name, key, f"the {word} loop reads `{n}`, but it is {self.why(n, st)}: {fix}")
            return
        if word == "dodyn":
            if n == plan.arrays[0] and reach == (0, 0):
                return
            send = f"r2a[E: {n}]" if st.root else f"a2a[E: {n}]"
            self.say(
                name, key,
                f"dodyn hands rows to whichever rank asks, so every rank needs all of `{n}`, but "
                f"it is {self.why(n, st)}: send it with `#$spmd {send}` before line {line}",
            )
            return
        if st.rows is None:
            if st.origin is not None and st.origin.what == "ror":
                fix = (
                    f"reduce it with `#$spmd roa` (every rank gets the result) instead of ror at "
                    f"line {st.origin.line}, or send it with `#$spmd r2a[{n}]`"
                )
            elif not is_array:
                fix = f"send it with `#$spmd r2a[{n}]`" if st.root else "set it on every rank"
            elif reach is not None:
                h = max(-reach[0], reach[1], 0)
                fix = f"send each rank its part with `#$spmd r2a[{'P' if h == 0 else f'P(X={h})'}: {n}]`"
                if not st.root:
                    fix = f"give every rank its part (`#$spmd r2a[P: {n}]` from a root that holds it)"
            else:
                fix = f"send it whole with `#$spmd r2a[E: {n}]`" if st.root else "give every rank all of it"
            self.say(
                name, key,
                f"the {word} loop reads `{what}` on every rank, but `{n}` is {self.why(n, st)}: "
                f"{fix} before line {line}",
            )
            return
        if reach is not None and _wraps(first, var) and not st.cyclic:
            reach = None  # wraps at the ends, which only a cyclic exchange brings
        if reach is None:
            if sub is None and not is_array:
                return
            self.say(
                sub or name, key,
                f"cannot tell which rows `{what}` reads in the {word} loop (`{n}` is "
                f"{st.describe()} here): if it reaches other rows, send all of it with "
                f"`#$spmd {'r2a' if st.root else 'a2a'}[E: {n}]` before line {line}; "
                "`parvox spmd run --verify` compares the parallel run with the serial one",
                "note",
            )
            return
        need = max(-reach[0], reach[1], 0)
        assert sub is not None
        if need > st.rows:
            need = self.needs.get(n, need)
            o = st.origin
            if o is not None and o.what in ("r2a", "a2a") and o.name == n:
                wider = f"{o.what}[P(X{'C' if st.cyclic else ''}={need}): {n}]"
                fix = (
                    f"`{o.text}` (line {o.line}) sends "
                    f"{'no' if not st.rows else f'only {st.rows}'} neighbour rows: write "
                    f"`{wider}` there"
                )
            else:
                fix = (
                    f"{n} is {self.why(n, st)}: exchange the neighbour rows with "
                    f"`#$spmd a2a[P(X={need}): {n}]` before line {line}"
                )
            self.say(
                sub, key,
                f"`{what}` reads {need} row(s) beyond each rank's part, but {fix}",
            )
            return
        if start is not None and start + reach[0] < 0 and not st.cyclic and st.rows != FULL:
            self.say(
                sub, key,
                f"at {var} = {start}, `{what}` reads row {start + reach[0]}, which Python takes "
                f"from the end of `{n}`; no rank holds those rows next to the first part: "
                f"use the cyclic `P(XC={need}): {n}` or start the loop at {-reach[0]}",
            )


def distribution_problems(source: Source, placements: Sequence[Placement]) -> list[Diagnostic]:
    """Errors and notes about data the ranks read but do not hold (see the module docstring).

    ``placements`` are the checker's (:class:`~parvox.spmd.checker.Placement`), from a
    program whose directives are otherwise correct.
    """
    flow = _Flow(source, placements)
    tree = source.tree
    assert tree is not None
    flow.block(tree.body, 0, len(source.lines) + 2, "all")
    return sorted(flow.problems.values())
