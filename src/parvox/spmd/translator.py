"""Translating a program with ``#$spmd`` directives into legible Python that calls the runtime.

Every directive stays in place as a comment; after it come, for each clause, one ``# spmd:``
comment that says what happens and the call that does it. A ``ronly`` region becomes an
``if spmd.is_root:`` block; a parallel loop keeps its body and gets a new iterable
(``for i in spmd.my_range(range(1, 511), out):``); ``pipe`` with a column chunk turns the loop
nest into ``for spmd_rows, spmd_cols in spmd.pipe_tiles(...)`` around the original loops.
Nothing is hidden in ``exec`` or wrappers: the translated file is what runs.

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
>>> print(translate(program, "squares.py"))  # doctest: +ELLIPSIS
# Translated from squares.py by `parvox spmd translate`: ...
...
from parvox.spmd.runtime import spmd
<BLANKLINE>
#$spmd init
# spmd: init -- start the runtime: spmd.rank is this rank of spmd.size, rank 0 is the root
spmd.init()
import numpy as np
out = np.zeros(8)
#$spmd dopar
# spmd: dopar -- this rank runs the iterations in its part of the rows of out
for i in spmd.my_range(range(8), out):
    out[i] = i * i
#$spmd a2r[P: out], end
# spmd: a2r -- every rank sends its part of out to the root
spmd.a2r_part(out)
# spmd: end -- wait for every rank, then finish the runtime
spmd.end()
"""

from __future__ import annotations

import ast
import dataclasses
import re

from parvox._text import plural
from parvox.spmd.checker import Analysis, LoopPlan, Placement, Region, analyse
from parvox.spmd.diagnostics import DirectiveError
from parvox.spmd.language import (
    OPS,
    Clause,
    Loop,
    Print,
    RankCount,
    Reduction,
    Ref,
    RootShare,
    Timer,
    Transfer,
    TransferItem,
    Value,
)
from parvox.spmd.source import read_source

__all__ = ["render", "render_with_lines", "translate"]

_IMPORT = "from parvox.spmd.runtime import spmd"


def _header(path: str) -> list[str]:
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return [
        f"# Translated from {name} by `parvox spmd translate`: each #$spmd directive is kept as a",
        '# comment and followed by the runtime calls it became, each after a "# spmd:" comment.',
        f"# Edit {name} and translate it again rather than editing this file.",
        "# ruff: noqa: E402",
    ]


def _value(v: Value) -> str:
    return v.name if isinstance(v, Ref) else str(v)


def _rows(v: Value) -> str:
    return f"{_value(v)} row" + ("" if v == 1 else "s")


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _unpack(names: list[str]) -> str:
    return f"({names[0]},)" if len(names) == 1 else ", ".join(names)


def _transfer(clause: Transfer) -> list[str]:
    out: list[str] = []
    scalars = [i.ref.name for i in clause.items if i.part == "scalar"]
    if scalars:
        out += [
            f"# spmd: r2a -- the root sends {_names(scalars)} to every rank in one message",
            f"{_unpack(scalars)} = spmd.r2a({', '.join(scalars)})",
        ]
    for item in clause.items:
        if item.part != "scalar":
            out += _array_transfer(clause.keyword, item)
    return out


def _array_transfer(word: str, item: TransferItem) -> list[str]:
    a = item.ref.name
    halo = ""
    said = ""
    if item.halo is not None:
        halo = f", halo={_value(item.halo)}" + (", cyclic=True" if item.cyclic else "")
        said = f" and the {_rows(item.halo)} on each side"
        said += " (cyclic: the first and last parts are neighbours)" if item.cyclic else ""
    if word == "r2a" and item.part == "E":
        return [f"# spmd: r2a -- the root sends all of {a} to every rank", f"spmd.r2a_entire({a})"]
    if word == "r2a":
        return [
            f"# spmd: r2a -- the root sends each rank its part of {a}{said}",
            f"spmd.r2a_part({a}{halo})",
        ]
    if word == "a2r":
        return [
            f"# spmd: a2r -- every rank sends its part of {a} to the root",
            f"spmd.a2r_part({a})",
        ]
    if item.part == "E":
        return [
            f"# spmd: a2a -- every rank gets all of {a}, each part from its owner",
            f"spmd.a2a_entire({a})",
        ]
    assert item.halo is not None
    return [
        f"# spmd: a2a -- each rank gets the {_rows(item.halo)} on each side of its part of {a} from their owners"
        + (" (cyclic)" if item.cyclic else ""),
        f"spmd.a2a_halo({a}{halo})",
    ]


def _reduction(clause: Reduction) -> list[str]:
    where = "the root gets" if clause.keyword == "ror" else "every rank gets"
    out: list[str] = []
    names: list[str] = []
    ops: list[str] = []
    said: list[str] = []
    for item in clause.items:
        if item.into is not None:
            a, b = item.refs[0].name, item.into.name
            out += [
                f"# spmd: {clause.keyword} -- {where} the {item.op} of {a} over all ranks in {b}",
                f'{b} = spmd.{clause.keyword}_into("{OPS[item.op]}", {a}, {b})',
            ]
            continue
        group = [r.name for r in item.refs]
        names += group
        ops += [OPS[item.op]] * len(group)
        said.append(f"the {item.op} of {_names(group)}")
    if names:
        how = " (scalars in one message)" if len(names) > 1 else ""
        out[:0] = [
            f"# spmd: {clause.keyword} -- {where} {_names(said)} over all ranks{how}",
            f'{_unpack(names)} = spmd.{clause.keyword}("{" ".join(ops)}", {", ".join(names)})',
        ]
    return out


def _loop_comment(plan: LoopPlan) -> str:
    c = plan.clause
    if c.keyword == "dopar":
        return f"# spmd: dopar -- this rank runs the iterations in its part of the rows of {_names(list(plan.arrays))}"
    array = plan.arrays[0]
    if c.keyword == "dodyn":
        assert c.chunk is not None
        serves = "" if c.root_works else " (the root only serves, it runs none)"
        return (
            f"# spmd: dodyn -- the root hands out chunks of {_value(c.chunk)} iterations to whoever asks{serves}; "
            f"each rank sends the rows of {array} it computed back to the root"
        )
    assert c.carry is not None
    if plan.inner is None:
        return (
            f"# spmd: pipe -- each rank waits for the {_rows(c.carry)} of {array} above its part, "
            f"runs its part, then passes its last {_rows(c.carry)} on"
        )
    assert c.chunk is not None
    return (
        f"# spmd: pipe -- a wavefront: the columns go in chunks of {_value(c.chunk)}; each rank takes a chunk's "
        f"{_rows(c.carry)} of {array} from the rank before, runs its rows on it and passes it on"
    )


def _clause_code(clause: Clause, placement: Placement) -> list[str]:
    word = clause.keyword
    if word == "init":
        return [
            "# spmd: init -- start the runtime: spmd.rank is this rank of spmd.size, rank 0 is the root",
            "spmd.init()",
        ]
    if word == "end":
        return ["# spmd: end -- wait for every rank, then finish the runtime", "spmd.end()"]
    if word == "barrier":
        return ["# spmd: barrier -- wait until every rank gets here", "spmd.barrier()"]
    if isinstance(clause, Timer):
        return [
            f"# spmd: {word}! -- the root starts or stops the timer spmd.{word}",
            f'spmd.toggle_timer("{word}")',
        ]
    if isinstance(clause, Print):
        args = ", ".join(i.name if isinstance(i, Ref) else repr(i) for i in clause.items)
        return ["# spmd: print -- the root prints this (to stderr)", f"spmd.print({args})"]
    if isinstance(clause, RankCount):
        return [
            f"# spmd: {word} -- warn unless the job has {clause.value} rank(s), the count the program was written for",
            f"spmd.expect_ranks({word}={clause.value})",
        ]
    if isinstance(clause, RootShare):
        return [
            f"# spmd: root_share -- from here on the root takes {clause.value:g} of an equal share of every split",
            f"spmd.set_root_share({clause.value!r})",
        ]
    if isinstance(clause, Transfer):
        return _transfer(clause)
    if isinstance(clause, Reduction):
        return _reduction(clause)
    if isinstance(clause, Loop):
        return [_loop_comment(placement.loop)] if placement.loop is not None else []
    raise AssertionError(f"no translation for {word}")  # every clause is handled above


@dataclasses.dataclass
class _Output:
    """The source lines with the edits, extra indentation and insertions of the translation."""

    lines: list[str | None]
    prefix: list[str]
    after: dict[int, list[str]]
    before: dict[int, list[str]]  # whole lines, indented, to put before a source line
    edits: list[tuple[int, int, int, int, str]]

    def edit(self, node: ast.expr, text: str, lines: tuple[str, ...], keep: bool = False) -> None:
        """Replace the source of ``node`` by ``text`` (``keep``: wrap it, ``text`` has a ``{}``)."""
        a = _char_col(lines, node.lineno, node.col_offset)
        b = _char_col(lines, node.end_lineno or node.lineno, node.end_col_offset or 0)
        end_line = node.end_lineno or node.lineno
        if keep:
            head, tail = text.split("{}")
            self.edits.append((end_line, b, end_line, b, tail))
            self.edits.append((node.lineno, a, node.lineno, a, head))
        else:
            self.edits.append((node.lineno, a, end_line, b, text))

    def apply(self) -> None:
        for l1, c1, l2, c2, text in sorted(self.edits, key=lambda e: (e[0], e[1]), reverse=True):
            first, last = self.lines[l1 - 1], self.lines[l2 - 1]
            assert first is not None and last is not None
            self.lines[l1 - 1] = first[:c1] + text + last[c2:]
            for k in range(l1, l2):
                self.lines[k] = None


def _char_col(lines: tuple[str, ...], line: int, byte_col: int) -> int:
    return len(lines[line - 1].encode()[:byte_col].decode(errors="replace"))


def _unit(analysis: Analysis) -> str:
    for ln in analysis.source.logical:
        if len(ln.levels) > 1:
            step = ln.levels[1]
            return "\t" if step.startswith("\t") else " " * len(step)
    return "    "


def _indent(out: _Output, lines: range, unit: str, in_string: frozenset[int]) -> None:
    for k in lines:
        if k not in in_string:
            out.prefix[k - 1] += unit


def _rewrite_loop(out: _Output, plan: LoopPlan, analysis: Analysis, unit: str) -> None:
    node, c = plan.node, plan.clause
    lines = analysis.source.lines
    wrap = None
    if c.keyword == "dopar":
        wrap = "spmd.my_range({}, " + ", ".join(plan.arrays) + ")"
    elif c.keyword == "dodyn":
        assert c.chunk is not None
        serves = "" if c.root_works else ", root_works=False"
        wrap = "spmd.dyn_range({}, " + f"{plan.arrays[0]}, chunk={_value(c.chunk)}{serves})"
    elif plan.inner is None:
        assert c.carry is not None
        wrap = "spmd.pipe_range({}, " + f"{plan.arrays[0]}, carry={_value(c.carry)})"
    if wrap is not None:
        out.edit(node.iter, wrap, lines, keep=True)
    else:
        assert c.carry is not None and c.chunk is not None and plan.inner is not None
        indent = lines[node.lineno - 1][: _char_col(lines, node.lineno, node.col_offset)]
        head = (
            f"{out.prefix[node.lineno - 1]}{indent}for spmd_rows, spmd_cols in spmd.pipe_tiles({ast.unparse(node.iter)}, "
            f"{ast.unparse(plan.inner.iter)}, {plan.arrays[0]}, carry={_value(c.carry)}, "
            f"chunk={_value(c.chunk)}):"
        )
        out.before.setdefault(node.lineno, []).append(head)
        out.edit(node.iter, "spmd_rows", lines)
        out.edit(plan.inner.iter, "spmd_cols", lines)
        _indent(
            out,
            range(node.lineno, (node.end_lineno or node.lineno) + 1),
            unit,
            analysis.source.in_string,
        )


def _directive_code(placement: Placement, analysis: Analysis, unit: str) -> list[str]:
    """The lines after a directive: per clause a comment and the call (indented as they run)."""
    d = placement.directive
    # the closing directive starts inside its region; a directive in the body is indented by
    # the region's prefix like the lines around it
    closes = placement.in_region and any(c.keyword == "ronly" for c in d.clauses)
    # clauses before a closing ncpus still run inside its section
    ends_ncpus = any(c.keyword == "ncpus" and not isinstance(c, RankCount) for c in d.clauses)
    depth = 1 if closes or ends_ncpus else 0
    timer_line = any(isinstance(c, Timer) for c in d.clauses)
    empty = {r.opener.pos for r in analysis.regions if r.empty}
    code: list[str] = []
    for clause in d.clauses:
        if clause.keyword in ("ncpus", "parblock", "section") and not (
            isinstance(clause, RankCount) and clause.keyword == "tcpus"
        ):
            lines, depth = _section_code(clause, d.pos.line, analysis)
            code += [placement.indent + line for line in lines]
            continue
        if clause.keyword == "ronly":
            if depth:
                code.append(f"{placement.indent}# spmd: ronly -- end of the root-only region")
                depth = 0
            elif not timer_line:
                code.append(
                    f"{placement.indent}# spmd: ronly -- only the root runs the lines up to the closing ronly"
                )
                code.append(f"{placement.indent}if spmd.is_root:")
                depth = 1
            continue
        code += [placement.indent + unit * depth + line for line in _clause_code(clause, placement)]
    if (
        depth
        and not placement.in_region
        and d.pos in empty
        and code[-1].endswith("if spmd.is_root:")
    ):
        code.append(placement.indent + unit + "pass  # the region holds no code")
    return code


def _getter(names: tuple[str, ...]) -> str:
    return f"lambda: ({names[0]},)" if len(names) == 1 else f"lambda: ({', '.join(names)})"


def _section_code(clause: Clause, line: int, analysis: Analysis) -> tuple[list[str], int]:
    """The code of an ``ncpus``/``parblock``/``section`` clause and the depth after it."""
    word = clause.keyword
    opens = [r for r in analysis.regions if r.opener.pos.line == line and r.kind != "ronly"]
    closes = [r for r in analysis.regions if r.closer.pos.line == line and r.kind != "ronly"]
    if isinstance(clause, RankCount):
        n = clause.value
        return [
            f"# spmd: ncpus -- the lines up to the closing ncpus run on the first {plural(n, 'rank')}, which split and communicate among themselves; the others skip them and wait",
            f"if spmd.ncpus_begin({n}):",
        ], 1
    if word == "ncpus":
        names = closes[0].names if closes else ()
        if not names:
            return [
                "# spmd: ncpus -- end of the section: every rank waits for it",
                "spmd.ncpus_end()",
            ], 0
        return [
            f"# spmd: ncpus -- end of the section: every rank gets the root's {_names(list(names))}",
            f"{_unpack(list(names))} = spmd.ncpus_end({_getter(names)})",
        ], 0
    out: list[str] = []
    if opens:
        k = _section_index(opens[0], analysis)
        if word == "parblock":
            count = sum(1 for r in analysis.regions if r.kind == "section" and r.block == line)
            out.append(
                f"# spmd: parblock -- {count} independent sections: rank k % spmd.size runs section k, the others skip it"
            )
        out += [f"# spmd: section {k} -- run by rank {k} % spmd.size", f"if spmd.section({k}):"]
        return out, 1
    block = closes[0].block if closes else line
    sections = [r for r in analysis.regions if r.kind == "section" and r.block == block]
    every = [n for r in sections for n in r.names]
    call = f"spmd.parblock_end({', '.join(_getter(r.names) if r.names else 'lambda: ()' for r in sections)})"
    said = (
        f"every rank gets what the sections assigned ({_names(every)})"
        if every
        else "every rank waits for the sections"
    )
    out.append(f"# spmd: parblock -- end of the block: {said}")
    out.append(f"{_unpack(every)} = {call}" if every else call)
    return out, 0


def _section_index(region: Region, analysis: Analysis) -> int:
    sections = [r for r in analysis.regions if r.kind == "section" and r.block == region.block]
    return sections.index(region)


def _import_line(analysis: Analysis) -> int:
    """The line after which the runtime import goes: past the docstring and __future__ imports."""
    tree = analysis.source.tree
    assert tree is not None
    last = 0
    for k, stmt in enumerate(tree.body):
        docstring = (
            k == 0
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        )
        future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if not (docstring or future):
            break
        last = stmt.end_lineno or stmt.lineno
    return last


def render(analysis: Analysis) -> str:
    """The translated program of an error-free :class:`~parvox.spmd.checker.Analysis`."""
    return render_with_lines(analysis)[0]


def render_with_lines(analysis: Analysis) -> tuple[str, tuple[int, ...]]:
    """The translation and, for each of its lines, the program line it comes from.

    Inserted calls map to their directive's line, the header to line 1; a traceback through
    the translation can so point at the program the user wrote (see
    :func:`parvox.spmd.program.run_translated`).

    Examples
    --------
    >>> from parvox.spmd import analyse, read_source
    >>> text, lines = render_with_lines(analyse(read_source("#$spmd init\\nx = 1\\n", "p.py")))
    >>> [(n, line) for n, line in zip(lines, text.splitlines()) if not line.startswith("#")]
    [(1, 'from parvox.spmd.runtime import spmd'), (1, ''), (1, 'spmd.init()'), (2, 'x = 1')]
    """
    if not analysis.ok:
        src = analysis.source
        raise DirectiveError(src.path, src.text, analysis.diagnostics)
    src = analysis.source
    n = len(src.lines)
    out = _Output(list(src.lines), [""] * n, {}, {}, [])
    unit = _unit(analysis)
    for region in analysis.regions:
        _indent(out, region.body, unit, src.in_string)
    for placement in analysis.placements:
        if placement.loop is not None:
            _rewrite_loop(out, placement.loop, analysis, unit)
        out.after.setdefault(placement.directive.last, []).extend(
            _directive_code(placement, analysis, unit)
        )
    out.apply()
    top = 0
    while top < n and top < 2 and re.match(r"#!|#.*coding[:=]", src.lines[top]):
        top += 1  # a shebang and an encoding line stay first
    imports_after = max(_import_line(analysis), top)
    result = list(src.lines[:top]) + _header(src.path)
    origin = list(range(1, top + 1)) + [1] * (len(result) - top)
    if imports_after == top:
        result += [_IMPORT, ""]
    origin += [1] * (len(result) - len(origin))
    firsts = {p.directive.last: p.directive.lines[0] for p in analysis.placements}
    for k in range(top + 1, n + 1):
        text = out.lines[k - 1]
        pre = out.prefix[k - 1]
        result += out.before.get(k, [])  # already indented
        origin += [k] * (len(result) - len(origin))
        if text is not None:
            result.append(pre + text if text.strip() else text)
            origin.append(k)
        result += [pre + line for line in out.after.get(k, [])]
        origin += [firsts.get(k, k)] * (len(result) - len(origin))
        if k == imports_after and imports_after != top:
            result += ["", _IMPORT]
            origin += [k, k]
    return "\n".join(result) + "\n", tuple(origin)


def translate(text: str, path: str = "<program>") -> str:
    """Translate program ``text``; raise :class:`~parvox.spmd.diagnostics.DirectiveError` on errors.

    Parameters
    ----------
    text : str
        The program, with ``#$spmd`` directives.
    path : str
        Its file name, for the header and the diagnostics.

    Returns
    -------
    str
        The translated program.
    """
    return render(analyse(read_source(text, path)))
