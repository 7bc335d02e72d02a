"""Checking a program's directives and working out what each one applies to.

:func:`analyse` places every directive in its block, pairs the ``ronly`` regions, finds the loop
each loop clause rewrites (and the arrays whose rows split it), and reports what would go wrong:
unknown clauses, an unclosed ``ronly``, a ``dopar`` not followed by a ``for ... in range(...)``
loop, ``a2r`` with ``E:``, a name the program never assigns, a ``barrier`` (or any clause all
ranks must reach) inside ``ronly``, a directive inside a ``parblock`` section, sections that
read what another section assigns, an unclosed ``ncpus`` section, and more. The
:class:`Analysis` it returns is what the translator renders.

Examples
--------
>>> program = '''#$spmd init
... import numpy as np
... out = np.zeros(8)
... #$spmd dopar
... for i in range(8):
...     out[i] = i * i
... #$spmd a2r[P: out], end
... '''
>>> a = analyse(read_source(program, "sq.py"))
>>> a.ok, a.placements[1].loop.arrays
(True, ('out',))
>>> [d.message for d in check(program.replace("a2r[P:", "a2r[E:"), "sq.py")]
['a2r moves parts only: write a2r[P: out] (E: is an entire array; use a2a[E: ...] to give every rank all of it)']
"""

from __future__ import annotations

import ast
import dataclasses

from parvox.spmd.diagnostics import Diagnostic, Severity
from parvox.spmd.distribution import distribution_problems
from parvox.spmd.language import (
    COLLECTIVE,
    RUNTIME_NAMES,
    Clause,
    Loop,
    Pos,
    Print,
    RankCount,
    Reduction,
    Ref,
    RootShare,
    Timer,
    Transfer,
)
from parvox.spmd.source import Directive, Source, read_source
from parvox.spmd.syntax import (
    assigned_names,
    early_exits,
    indexed_arrays,
    range_loop_problem,
    span_names,
)

__all__ = ["Analysis", "LoopPlan", "Placement", "Region", "analyse", "check"]


@dataclasses.dataclass(frozen=True)
class LoopPlan:
    """The loop a ``dopar``/``dodyn``/``pipe`` clause rewrites.

    Attributes
    ----------
    clause : Loop
        The clause.
    node : ast.For
        The loop.
    arrays : tuple of str
        The arrays whose rows split the loop (``dopar``: found from the body's subscripts).
    inner : ast.For or None
        ``pipe`` with column chunks: the inner loop over the second axis.
    """

    clause: Loop
    node: ast.For
    arrays: tuple[str, ...]
    inner: ast.For | None


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a directive's code goes: its indentation and whether a ronly region is open there."""

    directive: Directive
    indent: str
    in_region: bool
    loop: LoopPlan | None


@dataclasses.dataclass(frozen=True)
class Region:
    """A region: the directives that open and close it and the lines between.

    ``kind`` is ``"ronly"``, ``"ncpus"`` (run on the first ranks) or ``"section"`` (one
    section of a ``parblock``; ``block`` is the line of the ``parblock`` that opens it).
    ``names`` are the variables the region assigns (what an ``ncpus`` section or a
    ``parblock`` section gives every rank at its end).
    """

    opener: Directive
    closer: Directive
    indent: str
    empty: bool
    kind: str = "ronly"
    names: tuple[str, ...] = ()
    block: int = 0

    @property
    def body(self) -> range:
        """The source lines between the two directives."""
        return range(self.opener.last + 1, self.closer.lines[0])


@dataclasses.dataclass(frozen=True)
class Analysis:
    """A program's directives placed and checked (see :func:`analyse`)."""

    source: Source
    placements: tuple[Placement, ...]
    regions: tuple[Region, ...]
    diagnostics: tuple[Diagnostic, ...]

    @property
    def ok(self) -> bool:
        """Whether there is no error (warnings allowed)."""
        return not any(d.severity == "error" for d in self.diagnostics)


class _Checker:
    def __init__(self, source: Source) -> None:
        self.src = source
        assert source.tree is not None
        self.tree = source.tree
        self.problems: list[Diagnostic] = list(source.problems)
        self.assigned = assigned_names(self.tree)
        self.logical = source.logical
        self.fors = {
            n.lineno: n for n in ast.walk(self.tree) if isinstance(n, ast.For | ast.AsyncFor)
        }

    def say(self, pos: Pos | tuple[int, int], severity: Severity, message: str) -> None:
        line, col = (pos.line, pos.col) if isinstance(pos, Pos) else pos
        self.problems.append(Diagnostic(line, col, severity, message))

    def node_pos(self, node: ast.stmt | ast.expr) -> tuple[int, int]:
        text = self.src.lines[node.lineno - 1].encode()
        return node.lineno, len(text[: node.col_offset].decode(errors="replace"))

    # -- placement ------------------------------------------------------------------------
    def place(self, d: Directive) -> str:
        levels = self.src.levels(d.lines[0], d.last)
        if d.indent in levels or d.indent.strip():  # after code: reported by the reader
            return d.indent
        cols = ", ".join(str(len(lv) + 1) for lv in levels) or "none"
        self.say(
            d.pos,
            "error",
            f"indent the directive like a block it can belong to here (column {cols})",
        )
        return levels[-1] if levels else d.indent

    # -- loops ----------------------------------------------------------------------------
    def loop(self, d: Directive, clause: Loop, indent: str) -> LoopPlan | None:
        _, after = self.src.around(d.lines[0], d.last)
        between = [
            o
            for o in self.src.directives
            if d.last < o.lines[0] and (after is None or o.lines[0] < after.start)
        ]
        if between:
            self.say(
                between[0].pos,
                "error",
                f"{clause.keyword} (line {d.pos.line}) must come directly before its loop: put this directive before it",
            )
            return None
        node = self.fors.get(after.start) if after is not None else None
        why = range_loop_problem(node)
        if why is not None or not isinstance(node, ast.For):
            self.say(clause.pos, "error", f"{clause.keyword} {why}")
            return None
        if after is not None and after.indent != d.indent:
            self.say(
                d.pos,
                "error",
                f"indent {clause.keyword} like its loop (column {len(after.indent) + 1})",
            )
        assert isinstance(node.target, ast.Name)
        var = node.target.id
        for stmt, word in early_exits(node):
            self.say(
                self.node_pos(stmt),
                "error",
                f"`{word}` would leave the {clause.keyword} loop early on one rank; the ranks must run it to its end",
            )
        written, read = indexed_arrays(node.body, var)
        if clause.array is not None:
            arrays: tuple[str, ...] = (clause.array.name,)
            if clause.keyword != "dopar" and clause.array.name not in written:
                self.say(
                    clause.array.pos,
                    "warning",
                    f"the loop never writes {clause.array.name}[{var}, ...]: {clause.keyword} passes on the rows of {clause.array.name} the loop computes",
                )
        else:
            arrays = tuple(written or read)
            if not arrays:
                self.say(
                    clause.pos,
                    "error",
                    f"dopar: the loop body indexes no array with `{var}` (as in `a[{var}, ...]`); name the array whose rows split the loop: dopar[a]",
                )
                return None
        inner = None
        if clause.keyword == "pipe" and clause.chunk is not None:
            only = node.body[0] if len(node.body) == 1 else None
            why = range_loop_problem(only)
            if why is not None or not isinstance(only, ast.For):
                self.say(
                    clause.pos,
                    "error",
                    f"pipe with a column chunk cuts the inner loop: the outer loop's body must be one `for NAME in range(...)` loop ({why or 'found more statements'})",
                )
                return None
            inner = only
        return LoopPlan(clause, node, arrays, inner)

    # -- clauses --------------------------------------------------------------------------
    def refs(self, clause: Clause) -> list[Ref]:
        if isinstance(clause, Loop):
            return [r for r in (clause.array, clause.chunk, clause.carry) if isinstance(r, Ref)]
        if isinstance(clause, Transfer):
            out = [i.ref for i in clause.items]
            return out + [i.halo for i in clause.items if isinstance(i.halo, Ref)]
        if isinstance(clause, Reduction):
            return [r for i in clause.items for r in (*i.refs, *((i.into,) if i.into else ()))]
        if isinstance(clause, Print):
            return [i for i in clause.items if isinstance(i, Ref)]
        return []

    def names(self, clause: Clause) -> None:
        for ref in self.refs(clause):
            head, _, attr = ref.name.partition(".")
            if head == "spmd" and attr:
                if attr not in RUNTIME_NAMES:
                    self.say(
                        ref.pos,
                        "error",
                        f"the runtime has no {ref.name}; it has {', '.join('spmd.' + n for n in RUNTIME_NAMES)}",
                    )
            elif head not in self.assigned:
                self.say(ref.pos, "error", f"`{head}` is never assigned in the program")

    def transfer(self, clause: Transfer) -> None:
        for item in clause.items:
            name, at = item.ref.name, item.prefix or item.ref.pos
            if clause.keyword == "a2r" and item.part == "E":
                self.say(
                    at,
                    "error",
                    f"a2r moves parts only: write a2r[P: {name}] (E: is an entire array; use a2a[E: ...] to give every rank all of it)",
                )
            elif clause.keyword == "a2r" and item.part == "scalar":
                self.say(
                    at,
                    "error",
                    f"a2r moves array parts only: write a2r[P: {name}], or reduce a scalar with ror[OP: {name}]",
                )
            elif clause.keyword == "a2r" and item.halo is not None:
                self.say(
                    at, "error", f"a2r takes P: parts without neighbour rows: write a2r[P: {name}]"
                )
            elif clause.keyword == "a2a" and item.part == "scalar":
                self.say(
                    at,
                    "error",
                    f"a2a moves arrays: write a2a[E: {name}] or a2a[P(X=n): {name}]; for a scalar use roa or r2a",
                )
            elif clause.keyword == "a2a" and item.part == "P" and item.halo is None:
                self.say(
                    at,
                    "error",
                    f"a2a[P: {name}] exchanges nothing: write a2a[P(X=n): {name}] for n neighbour rows or a2a[E: {name}] for the whole array",
                )

    # -- the program ----------------------------------------------------------------------
    def run(self) -> Analysis:
        for node in ast.walk(self.tree):
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Store)
                and (node.id == "spmd" or node.id.startswith("spmd_"))
            ):
                self.say(
                    self.node_pos(node),
                    "error",
                    f"`{node.id}` is reserved for the directive runtime: rename it",
                )
        futures = [
            n.end_lineno or n.lineno
            for n in self.tree.body
            if isinstance(n, ast.ImportFrom) and n.module == "__future__"
        ]
        for d in self.src.directives:
            if futures and d.lines[0] < futures[-1]:
                self.say(
                    d.pos,
                    "error",
                    "a directive before `from __future__ import ...`: those imports must come first; move the directive after them",
                )
        placements: list[Placement] = []
        regions: list[Region] = []
        opener: tuple[Directive, str] | None = None
        loops: list[LoopPlan] = []
        ncpus: tuple[Directive, str] | None = None
        par: tuple[Directive, str, Directive] | None = None  # (parblock, indent, section start)
        sections: list[Region] = []
        inits = [d for d in self.src.directives if any(c.keyword == "init" for c in d.clauses)]
        for d in self.src.directives:
            indent = self.place(d)
            in_region = opener is not None
            plan: LoopPlan | None = None
            timer_line = any(isinstance(c, Timer) for c in d.clauses)
            if sum(isinstance(c, Loop) for c in d.clauses) > 1:
                self.say(
                    d.pos,
                    "error",
                    "one directive can rewrite one loop: keep one of dopar, dodyn and pipe",
                )
            for clause in d.clauses:
                self.names(clause)
                if isinstance(clause, Transfer):
                    self.transfer(clause)
                if par is not None and clause.keyword not in ("parblock", "section"):
                    self.say(
                        clause.pos,
                        "error",
                        f"{clause.keyword} inside the parblock of line {par[0].pos.line}: each section runs on one rank alone, so a directive there would not reach the other ranks; move it before or after the block",
                    )
                    continue
                if clause.keyword == "section":
                    if par is None:
                        self.say(
                            clause.pos,
                            "error",
                            "section outside a parblock: open the block with `#$spmd parblock`",
                        )
                    else:
                        sections.append(self.region(par[2], d, par[1], "section", par[0]))
                        par = (par[0], par[1], d)
                    continue
                if clause.keyword == "parblock" and opener is None:
                    if par is None:
                        par = (d, indent, d)
                    else:
                        sections.append(self.region(par[2], d, par[1], "section", par[0]))
                        regions += self.parblock(sections)
                        par, sections = None, []
                    continue
                if clause.keyword == "ncpus" and opener is None:
                    if isinstance(clause, RankCount):
                        if ncpus is not None:
                            self.say(
                                clause.pos,
                                "error",
                                f"an ncpus section inside the one opened at line {ncpus[0].pos.line}: close that one first with `#$spmd ncpus`",
                            )
                        else:
                            ncpus = (d, indent)
                    elif ncpus is None:
                        self.say(
                            clause.pos,
                            "error",
                            "this ncpus closes no section: open one with `#$spmd ncpus=n`",
                        )
                    else:
                        region = self.region(ncpus[0], d, ncpus[1], "ncpus")
                        if region.empty:
                            self.say(ncpus[0].pos, "error", "this ncpus section holds no code")
                        regions.append(region)
                        ncpus = None
                    continue
                if isinstance(clause, RootShare) and not any(
                    c.keyword == "init" for c in d.clauses
                ):
                    self.say(
                        clause.pos,
                        "error",
                        "root_share sets the split of every loop and transfer: write it with init (`#$spmd init, root_share=f`)",
                    )
                if clause.keyword == "ronly":
                    if opener is not None:
                        start, level = opener
                        regions.append(self.region(start, d, level))
                        opener = None
                    elif not timer_line:
                        opener = (d, indent)
                    continue
                if opener is not None and clause.keyword in COLLECTIVE:
                    self.say(
                        clause.pos,
                        "error",
                        f"{clause.keyword} inside a ronly region (opened at line {opener[0].pos.line}): the other ranks never reach it and wait forever; move it after the closing ronly",
                    )
                if isinstance(clause, Loop) and opener is None:
                    plan = self.loop(d, clause, indent)
                    if plan is not None:
                        loops.append(plan)
                if clause.keyword == "init" and inits and d is not inits[0]:
                    self.say(
                        clause.pos,
                        "error",
                        f"a second init (the first is at line {inits[0].pos.line})",
                    )
            placements.append(Placement(d, indent, in_region, plan))
        if opener is not None:
            self.say(
                opener[0].pos,
                "error",
                "this ronly region is never closed: end it with another `#$spmd ronly`",
            )
        if ncpus is not None:
            self.say(
                ncpus[0].pos,
                "error",
                "this ncpus section is never closed: end it with `#$spmd ncpus`",
            )
        if par is not None:
            self.say(
                par[0].pos,
                "error",
                "this parblock is never closed: end it with another `#$spmd parblock`",
            )
        self.halo_share(placements)
        self.loops(loops)
        self.program(regions)
        if not any(d.severity == "error" for d in self.problems):
            self.problems += distribution_problems(self.src, placements, regions)
        return Analysis(
            self.src, tuple(placements), tuple(regions), tuple(sorted(set(self.problems)))
        )

    def parblock(self, sections: list[Region]) -> list[Region]:
        """Check the sections of one parblock: not empty, each writing what no other reads."""
        owner: dict[str, Region] = {}
        for sec in sections:
            if sec.empty:
                self.say(
                    sec.opener.pos,
                    "error",
                    f"an empty section of the parblock of line {sec.block}: give it code or drop this divider",
                )
            for name in sec.names:
                if name in owner:
                    self.say(
                        sec.opener.pos,
                        "error",
                        f"two sections of the parblock of line {sec.block} assign `{name}` (the one after line {owner[name].opener.pos.line} and this one): sections run at once on different ranks; assign it in one section only",
                    )
                else:
                    owner[name] = sec
        assert self.tree is not None
        for sec in sections:
            for node in span_names(self.tree, sec.body)[1]:
                other = owner.get(node.id)
                if other is not None and other is not sec and node.id not in sec.names:
                    self.say(
                        self.node_pos(node),
                        "error",
                        f"`{node.id}` is assigned by another section of the parblock of line {sec.block} (after line {other.opener.pos.line}): sections run at once on different ranks, so one cannot read what another computes; read it after the block",
                    )
        return sections

    def halo_share(self, placements: list[Placement]) -> None:
        """With ``root_share`` the parts are uneven: halo rows need the even split."""
        shared = [c for p in placements for c in p.directive.clauses if isinstance(c, RootShare)]
        if not shared or shared[0].value == 1.0:
            return
        for p in placements:
            for c in p.directive.clauses:
                if isinstance(c, Transfer):
                    for item in c.items:
                        if item.halo is not None:
                            self.say(
                                item.prefix or item.ref.pos,
                                "error",
                                f"neighbour rows (X=n) need the even split, but root_share={shared[0].value:g} (line {shared[0].pos.line}) gives the root a lighter part: drop one of them",
                            )

    def region(
        self,
        opener: Directive,
        closer: Directive,
        indent: str,
        kind: str = "ronly",
        block: Directive | None = None,
    ) -> Region:
        word = {"ronly": "ronly region", "ncpus": "ncpus section", "section": "parblock section"}[
            kind
        ]
        closing = {"ronly": "ronly", "ncpus": "ncpus"}.get(kind, "directive")
        if closer.indent != indent:
            self.say(
                closer.pos,
                "error",
                f"this {closing} closes the {word.replace('ronly ', '')} opened at line {opener.pos.line}, which is indented to column {len(indent) + 1}: indent both alike, in one block",
            )
        inside = [ln for ln in self.logical if opener.last < ln.start < closer.lines[0]]
        for ln in inside:
            if len(ln.indent) < len(indent):
                self.say(
                    (ln.start, len(ln.indent)),
                    "error",
                    f"the {word} opened at line {opener.pos.line} leaves its block here: close it before this line",
                )
                break
        directives = [o for o in self.src.directives if opener.last < o.lines[0] < closer.lines[0]]
        body = range(opener.last + 1, closer.lines[0])
        names = tuple(span_names(self.tree, body)[0]) if kind != "ronly" else ()
        return Region(
            opener,
            closer,
            indent,
            not inside and not directives,
            kind,
            names,
            block.pos.line if block is not None else 0,
        )

    def loops(self, plans: list[LoopPlan]) -> None:
        for plan in plans:
            lo, hi = plan.node.lineno, plan.node.end_lineno or plan.node.lineno
            for other in plans:
                if other is not plan and lo < other.node.lineno <= hi:
                    self.say(
                        other.clause.pos,
                        "error",
                        f"{other.clause.keyword} inside the {plan.clause.keyword} loop of line {lo}: parallel loops cannot be nested",
                    )
            for d in self.src.directives:
                if lo < d.pos.line <= hi:
                    for c in d.clauses:
                        if c.keyword in COLLECTIVE and not isinstance(c, Loop):
                            self.say(
                                c.pos,
                                "error",
                                f"{c.keyword} inside the {plan.clause.keyword} loop of line {lo}: the ranks run different iterations, so they would not all reach it",
                            )

    def program(self, regions: list[Region]) -> None:
        directives = self.src.directives
        first: dict[str, Directive] = {}
        for d in directives:
            for c in d.clauses:
                first.setdefault(c.keyword, d)
        if directives and "init" not in first:
            self.say(
                directives[0].pos,
                "warning",
                "no `#$spmd init`: the runtime starts at the first directive; put init at the start of the program",
            )
        elif directives and directives[0] is not first["init"]:
            self.say(
                directives[0].pos,
                "warning",
                f"a directive before `#$spmd init` (line {first['init'].pos.line})",
            )
        if directives and "end" not in first:
            self.say(directives[-1].pos, "warning", "no `#$spmd end` at the end of the program")
        for word in ("time", "ttime"):
            uses = [c for d in directives for c in d.clauses if c.keyword == word]
            if len(uses) % 2:
                self.say(
                    uses[-1].pos,
                    "warning",
                    f"{word}! appears {len(uses)} times: each use starts or stops the timer, so they come in pairs",
                )
        spans = [(r.opener.last, r.closer.lines[0]) for r in regions]
        defs = [
            (n.lineno, n.end_lineno or n.lineno)
            for n in ast.walk(self.tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        ]
        for node in ast.walk(self.tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
            ):
                line = node.lineno
                if not any(a < line < b for a, b in spans) and not any(
                    a <= line <= b for a, b in defs
                ):
                    self.say(
                        self.node_pos(node),
                        "warning",
                        "print() outside a ronly region runs on every rank (one copy of the output per rank)",
                    )


def analyse(source: Source) -> Analysis:
    """Place and check every directive of a program read by :func:`~parvox.spmd.source.read_source`.

    Returns an :class:`Analysis` whose :attr:`~Analysis.diagnostics` hold every error and
    warning in source order (with no placements when the program does not parse).
    """
    if source.tree is None:
        return Analysis(source, (), (), tuple(sorted(source.problems)))
    return _Checker(source).run()


def check(text: str, path: str = "<program>") -> list[Diagnostic]:
    """Every error and warning about the directives of program ``text``, in source order.

    Examples
    --------
    >>> [d.message for d in check("#$spmd init\\n#$spmd ronly\\nx = 1\\n#$spmd end\\n")]
    ['this ronly region is never closed: end it with another `#$spmd ronly`', 'end inside a ronly region (opened at line 2): the other ranks never reach it and wait forever; move it after the closing ronly']
    """
    return list(analyse(read_source(text, path)).diagnostics)
