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

After an ``ncpus`` section or a ``parblock`` every rank holds what the section assigned, whole
(the root's value, or the value of the rank that ran the section); a ``parblock`` section, run
on one rank, must read only what every rank holds whole.

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
from collections.abc import Sequence
from typing import TYPE_CHECKING

from parvox.spmd.accesses import (
    LIKE,
    MUTATORS,
    REDUCERS,
    SHAPE_ATTRS,
    bound_names,
    callee,
    first_index,
    has_axis,
    is_full,
    name_reads,
    row_offset,
)
from parvox.spmd.diagnostics import Diagnostic, Severity
from parvox.spmd.language import (
    COLLECTIVE,
    RankCount,
    Reduction,
    Timer,
    Transfer,
    TransferItem,
)
from parvox.spmd.loopreads import check_parallel_loop
from parvox.spmd.states import (
    ENTIRE,
    FULL,
    NAMED,
    Origin,
    State,
    explain,
    meet,
    shifted,
    spell,
    unrow,
)

if TYPE_CHECKING:
    from parvox.spmd.checker import LoopPlan, Placement, Region
    from parvox.spmd.source import Source

__all__ = ["Flow", "distribution_problems"]


class Flow:
    """The interpretation of one program: the state of every variable, the problems found."""

    def __init__(
        self, src: Source, placements: Sequence[Placement], regions: Sequence[Region] = ()
    ) -> None:
        self.src = src
        # ncpus sections and parblocks by the line of the directive that closes them
        self.closing: dict[int, list[Region]] = {}
        self.opening: set[int] = set()  # the lines of the parblocks' opening directives
        for r in regions:
            if r.kind != "ronly":
                self.closing.setdefault(r.closer.pos.line, []).append(r)
            if r.kind == "section" and r.opener.pos.line == r.block:
                self.opening.add(r.block)
        self.placements = sorted(placements, key=lambda p: p.directive.lines[0])
        self.plans: dict[int, tuple[LoopPlan, int]] = {
            id(p.loop.node): (p.loop, p.directive.pos.line)
            for p in placements
            if p.loop is not None
        }
        self.state: dict[str, State] = {}
        self.entry: dict[str, State] = {}  # the states where the open ncpus section began
        self.known: set[str] = set()  # names every rank has bound (imports, defs, loops, ...)
        self.row_vars: list[str] = []  # variables of the loops over rows around a statement
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
        self,
        node: ast.AST | tuple[int, int],
        key: tuple[str, int],
        message: str,
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

    def put(self, name: str, s: State) -> None:
        self.state[name] = s

    # -- values -------------------------------------------------------------------------
    def value(self, e: ast.AST | None) -> State:
        """The state of an expression evaluated on every rank (or on the root)."""
        if e is None or isinstance(e, ast.Constant):
            return ENTIRE
        if isinstance(e, ast.Name):
            return self.get(e.id)
        if isinstance(e, ast.Attribute):
            return ENTIRE if e.attr in SHAPE_ATTRS else self.value(e.value)
        if isinstance(e, ast.Subscript):
            base = self.value(e.value)
            index = meet(self.value(e.slice), ENTIRE)
            first = first_index(e)
            if is_full(first):
                return meet(base, index)
            shift = self.row_shift(first)
            if shift is not None:  # row v of a loop over the rows on every rank: rows stay
                return meet(shifted(base, shift), unrow(index))
            if (
                isinstance(first, ast.Constant)
                and first.value == 0
                and base.partial is None
                and base.rows is not None
            ):
                base = State(True, None, origin=base.origin) if base.rows != FULL else base
            return meet(unrow(base), unrow(index))
        if isinstance(e, ast.Call):
            name = callee(e)
            args = [*e.args, *(k.value for k in e.keywords)]
            if name in LIKE and e.args:
                args = args[1:]
            s = self.value(e.func.value) if isinstance(e.func, ast.Attribute) else ENTIRE
            for a in args:
                s = meet(s, self.value(a))
            return unrow(s) if name in REDUCERS and not has_axis(e) else s
        if isinstance(e, ast.Lambda):
            return ENTIRE
        s = ENTIRE
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr | ast.comprehension):
                s = meet(s, self.value(child))
        return s

    def row_shift(self, index: ast.expr) -> int | None:
        """``k`` when ``index`` is ``v + k`` for ``v`` a loop over the rows on every rank."""
        for var in reversed(self.row_vars):
            k = row_offset(index, var)
            if k is not None:
                return k
        return None

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
            if lo < p.directive.lines[0] < hi
            and p.indent == indent
            and not any(
                s.lineno <= p.directive.lines[0] <= (s.end_lineno or s.lineno) for s in body
            )
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
            if c.keyword == "parblock":
                if d.pos.line in self.opening:
                    mode = "section"
                else:
                    mode = "all"
                    self.shared_after(d.pos.line, "parblock")
                continue
            if c.keyword == "ncpus" and mode == "all":
                if isinstance(c, RankCount):
                    self.entry = dict(self.state)
                else:
                    self.shared_after(d.pos.line, "ncpus")
                continue
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
                    for ref in r.refs:
                        if self.unbound(ref.name, (ref.pos.line, ref.pos.col), d.pos.line):
                            continue
                        self.reduces_a_whole(c.keyword, r.op, ref.name, ref.pos.line, ref.pos.col)
                    for ref in (r.into,) if r.into is not None else r.refs:
                        o = Origin(origin_word, d.pos.line, ref.name, f"{origin_word}[{r.op}: ...]")
                        self.put(ref.name, dataclasses.replace(after, origin=o))
        return mode, region

    def shared_after(self, line: int, what: str) -> None:
        """After an ncpus section or a parblock every rank holds what it assigned, whole.

        What else an ncpus section changed (an array its transfers moved in place) only the
        section's ranks saw, split among themselves: afterwards the root keeps the whole
        value it held, and no other rank holds anything certain.
        """
        assigned = {n for r in self.closing.get(line, []) for n in r.names}
        if what == "ncpus":
            for name, st in list(self.state.items()):
                if name not in assigned and self.entry.get(name) != st:
                    o = Origin("ncpus", line, name, "ncpus")
                    self.put(name, State(st.root and st.partial is None, None, origin=o))
        for r in self.closing.get(line, []):
            for name in r.names:
                st = self.get(name)
                if r.kind == "ncpus" and (not st.root or st.partial is not None):
                    self.say(
                        (line, r.closer.pos.col),
                        (name, line),
                        f"every rank gets the root's `{name}` at the end of the ncpus section "
                        f"(line {line}), but the root does not hold it whole "
                        f"({explain(name, st)}){self.fix_for(name, st, line)}",
                    )
                o = Origin(what, line, name, what)
                self.put(name, State(True, FULL, False, None, o))
                self.known.add(name)

    def whole_fix(self, name: str, st: State, op: str) -> str:
        """The directive that gives every rank all of ``name`` (in state ``st``)."""
        if st.partial is not None:
            return f"reduce it first with `#$spmd roa[{st.partial or op}: {name}]`"
        if st.root:
            return (
                f"send it first with `#$spmd r2a[{f'E: {name}' if name in self.arrays else name}]`"
            )
        return f"give every rank all of it (`#$spmd a2a[E: {name}]`)"

    def section_reads(self, s: ast.stmt) -> None:
        """A parblock section runs on one rank: what it reads must be whole on every rank."""
        for part in self.read_parts(s):
            for name, _sub in name_reads(part):
                st = self.state.get(name.id)
                if st is None or (st.rows == FULL and st.partial is None and st.bound):
                    continue
                fix = self.whole_fix(name.id, st, "SUM") if st.bound else "assign it on every rank"
                self.say(
                    name,
                    (name.id, s.lineno),
                    f"a parblock section reads `{name.id}` on whichever rank runs it, but it is "
                    f"{explain(name.id, st)}: {fix} before the block",
                )

    def reduces_a_whole(self, word: str, op: str, name: str, line: int, col: int) -> None:
        """Warn when a SUM/PROD combines a scalar every rank already holds whole."""
        st = self.state.get(name)
        if (
            st is None
            or op not in ("SUM", "PROD")
            or name in self.arrays
            or st.rows != FULL
            or st.partial is not None
        ):
            return
        self.say(
            (line, col),
            (name, line),
            f"every rank holds the same `{name}` here (no parallel loop updated it): the {op} "
            f"over the ranks counts it once per rank; drop it from {word}, or update it in a "
            "dopar loop first",
            "warning",
        )

    def transfer(self, word: str, item: TransferItem, line: int) -> None:
        name, at = item.ref.name, (item.ref.pos.line, item.ref.pos.col)
        s = self.get(name)
        spelled = spell(word, item)
        key = (name, line)
        halo = item.halo if isinstance(item.halo, int) else (0 if item.halo is None else NAMED)
        if self.unbound(name, at, line, f", then send it with `#$spmd {spelled}`"):
            pass
        elif word == "r2a" and not s.root:
            fix = self.fix_for(name, s, line)
            self.say(
                at,
                key,
                f"`{spelled}` sends the root's {name}, but the root does not hold it whole here "
                f"({explain(name, s)}){fix}",
            )
        elif word in ("a2r", "a2a") and (s.rows is None or s.partial is not None):
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
            self.say(at, key, f"`{name}` is {explain(name, s)}: {how}")
        o = Origin(word, line, name, spelled)
        if word == "r2a":
            rows = FULL if item.part in ("E", "scalar") else halo
            self.put(name, State(True, rows, item.cyclic and rows != FULL, None, o))
        elif word == "a2r":
            self.put(name, State(True, s.rows if s.rows is not None else 0, s.cyclic, None, o))
        elif item.part == "E":
            self.put(name, State(True, FULL, False, None, o))
        else:
            rows = max(halo, s.rows or 0)
            self.put(name, State(s.root, rows, item.cyclic or s.cyclic, None, o))

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
            check_parallel_loop(self, s, plan, line)
            return
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
            saved, self.state = self.state, {}
            self.block(s.body, s.lineno, hi, "all")
            self.state = saved
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.binds([s.name], mode, region)
            return
        if mode == "root":
            self.root_reads(s, region)
        elif mode == "all":
            self.bound_reads(s)
        elif mode == "section":
            self.section_reads(s)
        if isinstance(s, ast.For | ast.AsyncFor | ast.While):
            if isinstance(s, ast.For | ast.AsyncFor):
                it = self.value(s.iter)
                for n in ast.walk(s.target):
                    if isinstance(n, ast.Name):
                        if mode != "root":  # every rank, or the one running a section
                            self.known.add(n.id)
                        self.put(
                            n.id, unrow(it) if mode != "root" else self.rooted(it, n.id, region)
                        )
            stop = s.orelse[0].lineno if s.orelse else hi
            rows = (
                isinstance(s, ast.For)
                and isinstance(s.target, ast.Name)
                and isinstance(s.iter, ast.Call)
                and callee(s.iter) == "range"
                and mode == "all"
            )
            if rows:
                assert isinstance(s, ast.For) and isinstance(s.target, ast.Name)
                self.row_vars.append(s.target.id)
            self.fixpoint(s.body, s.lineno, stop, mode)
            if rows:
                self.row_vars.pop()
            if isinstance(s, ast.While) and mode == "all":
                self.branch_test(s, s.test, hi)  # its state at the loop head
            self.block(s.orelse, s.lineno, hi, mode)
            return
        if isinstance(s, ast.If):
            if mode == "all":
                self.branch_test(s, s.test, hi)
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
                    names = [n.id for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name)]
                    self.binds(names, mode, region)
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
                    self.assign(
                        t, self.value(s.value), mode, region, aug=isinstance(s, ast.AugAssign)
                    )
            return
        if isinstance(s, ast.Import | ast.ImportFrom | ast.Global | ast.Nonlocal):
            self.binds(sorted(bound_names([s])), mode, region)
            return
        if isinstance(s, ast.Delete):
            for bound in bound_names([s]):
                self.state.pop(bound, None)
            return
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            f = s.value.func
            if (
                isinstance(f, ast.Attribute)
                and isinstance(f.value, ast.Name)
                and (f.attr in MUTATORS and f.value.id in self.state)
            ):
                v = self.value(s.value)
                self.assign(f.value, v, mode, region, aug=True)

    def binds(self, names: list[str], mode: str, region: tuple[str, int] | None) -> None:
        """Names bound by an import, def, class or ``with ... as``: values the checker ignores."""
        for name in names:
            if mode == "all" or name in self.known:  # a section's imports stay on its rank
                self.known.add(name)
                self.state.pop(name, None)
            else:  # the root alone has it
                o = Origin("ronly", region[1] if region else 0, name)
                self.put(name, State(True, None, origin=o, bound=False))

    def branch_test(self, s: ast.stmt, test: ast.expr, hi: int) -> None:
        """Refuse a condition the ranks may disagree on when directives lie behind it.

        Every rank must reach the same transfers and parallel loops; a test on a partial
        result or on a value only the root holds can send the ranks different ways, and they
        then wait for each other forever.
        """
        indent = len(self.indent_of(s))
        inside = [
            c.keyword
            for p in self.placements
            if s.lineno < p.directive.lines[0] < hi and len(p.indent) > indent
            for c in p.directive.clauses
            if c.keyword in COLLECTIVE
        ]
        if not inside:
            return
        for name, _sub in name_reads(test):
            st = self.state.get(name.id)
            if st is None or not st.bound or (st.rows == FULL and st.partial is None):
                continue
            if st.partial is None and st.origin is not None and st.origin.what == "ror":
                fix = f"reduce it with roa instead of ror (line {st.origin.line})"
            else:
                fix = self.whole_fix(name.id, st, "MAX")
            self.say(
                name,
                (name.id, s.lineno),
                f"`{name.id}` decides which way every rank goes here, and {inside[0]} lies "
                f"behind it, but `{name.id}` is {explain(name.id, st)}: the ranks may take "
                f"different ways and wait for each other forever; {fix} before line {s.lineno}",
            )

    def rooted(self, v: State, name: str, region: tuple[str, int] | None) -> State:
        """A value assigned to ``name`` on the root only."""
        o = Origin("ronly", region[1] if region else 0, name)
        old = self.state.get(name)
        bound = old.bound if old is not None else name in self.known
        return State(v.root, None, False, v.partial, o if v.root or not bound else v.origin, bound)

    def assign(
        self, t: ast.expr, v: State, mode: str, region: tuple[str, int] | None, aug: bool
    ) -> None:
        if isinstance(t, ast.Starred):
            t = t.value
        if isinstance(t, ast.Tuple | ast.List):
            for e in t.elts:
                self.assign(e, unrow(v), mode, region, aug)
            return
        if isinstance(t, ast.Name):
            new = meet(self.get(t.id), v) if aug else v
            if mode == "root":
                new = self.rooted(new, t.id, region)
            else:
                self.known.add(t.id)
                new = dataclasses.replace(new, bound=True)
            self.put(t.id, new)
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
                    is_full(i)
                    for i in (t.slice.elts if isinstance(t.slice, ast.Tuple) else [t.slice])
                )
                and not aug
            )
            if isinstance(t, ast.Subscript) and not is_full(first_index(t)):
                if self.row_shift(first_index(t)) == 0:  # row v of a loop over rows: aligned
                    v = meet(v, unrow(self.value(t.slice)))
                else:
                    v = meet(unrow(v), unrow(self.value(t.slice)))
            new = v if whole else meet(old, v)
            if mode == "root":
                root = v.root if whole else old.root and v.root
                o = Origin("ronly", region[1] if region else 0, base.id)
                new = State(root, None, False, new.partial, o if root else new.origin, old.bound)
            self.put(base.id, new)

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
    @staticmethod
    def read_parts(s: ast.stmt) -> list[ast.AST]:
        """The parts of a statement that it evaluates itself (a compound one: its header)."""
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
        elif not isinstance(s, ast.Try | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            parts = [s]
        return parts

    def unbound(self, name: str, at: ast.AST | tuple[int, int], line: int, then: str = "") -> bool:
        """Report a read on every rank of a name only the root has; whether it was one."""
        st = self.state.get(name)
        if st is None or st.bound:
            return False
        where = st.origin.line if st.origin is not None else line
        self.say(
            at,
            (name, where),
            f"`{name}` is {explain(name, st)}, but every rank reads it here: assign it on every "
            f"rank before line {where} (as the serial program would, e.g. `{name} = None`){then}",
        )
        return True

    def bound_reads(self, s: ast.stmt) -> None:
        for part in self.read_parts(s):
            for name, _sub in name_reads(part):
                self.unbound(name.id, name, s.lineno)

    def root_reads(self, s: ast.stmt, region: tuple[str, int] | None) -> None:
        parts = self.read_parts(s)
        line = region[1] if region else s.lineno
        for part in parts:
            for name, _sub in name_reads(part):
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
                    name,
                    (name.id, line),
                    f"the root reads `{name.id}` here, but it is {explain(name.id, st)}: {fix}",
                )

    # -- parallel loops ---------------------------------------------------------------


def distribution_problems(
    source: Source, placements: Sequence[Placement], regions: Sequence[Region] = ()
) -> list[Diagnostic]:
    """Errors and notes about data the ranks read but do not hold (see the module docstring).

    ``placements`` and ``regions`` are the checker's (:class:`~parvox.spmd.checker.Placement`,
    :class:`~parvox.spmd.checker.Region`), from a program whose directives are otherwise
    correct. After an ``ncpus`` section or a ``parblock`` every rank holds what it assigned.
    """
    flow = Flow(source, placements, regions)
    tree = source.tree
    assert tree is not None
    flow.block(tree.body, 0, len(source.lines) + 2, "all")
    return sorted(flow.problems.values())
