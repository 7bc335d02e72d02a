"""Reading a Python program with directives: its tokens, logical lines, syntax tree and directives.

Comments exist only in :mod:`tokenize`'s view of a program, statements only in :mod:`ast`'s;
:func:`read_source` runs both and keeps what the checker and translator need: every logical
line with the indentation levels open at it, the lines inside multi-line strings (never to be
re-indented), and the directives with their clauses and exact positions.

Examples
--------
>>> src = read_source("#$spmd init\\nx = 1\\n#$spmd barrier, end\\n", "p.py")
>>> [(d.lines, [c.keyword for c in d.clauses]) for d in src.directives]
[((1,), ['init']), ((3,), ['barrier', 'end'])]
>>> src.problems
()
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import io
import re
import tokenize

from parvox.spmd.diagnostics import Diagnostic
from parvox.spmd.language import Clause, Pos, parse_clauses

__all__ = ["Directive", "LogicalLine", "Source", "read_source"]

_DIRECTIVE = re.compile(r"#\$spmd(?=\s|$)", re.IGNORECASE)
_NEAR_MISS = re.compile(r"#\s*\$?\s*spmd\b", re.IGNORECASE)
#: Keywords that continue a compound statement: nothing may be inserted right before them
#: at their own indentation.
_CONTINUATIONS = frozenset({"else", "elif", "except", "finally"})


@dataclasses.dataclass(frozen=True)
class LogicalLine:
    """One logical line of code (a statement or a compound statement's header).

    Attributes
    ----------
    start, end : int
        Its first and last physical line.
    indent : str
        Its leading whitespace.
    first : str
        Its first token (``for``, ``else``, a name, ...).
    opens_block : bool
        Whether it ends with ``:`` (a block follows).
    levels : tuple of str
        The indentations of the blocks open at it, outermost first (its own is the last).
    """

    start: int
    end: int
    indent: str
    first: str
    opens_block: bool
    levels: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Directive:
    """One directive: its physical lines (continuations included), position and clauses."""

    lines: tuple[int, ...]
    pos: Pos
    indent: str
    clauses: tuple[Clause, ...]

    @property
    def last(self) -> int:
        """The directive's last physical line."""
        return self.lines[-1]


@dataclasses.dataclass(frozen=True)
class Source:
    """A program read for checking and translation (see :func:`read_source`)."""

    path: str
    text: str
    lines: tuple[str, ...]
    tree: ast.Module | None
    logical: tuple[LogicalLine, ...]
    directives: tuple[Directive, ...]
    in_string: frozenset[int]
    problems: tuple[Diagnostic, ...]

    def around(self, first: int, last: int) -> tuple[LogicalLine | None, LogicalLine | None]:
        """The logical lines just before line ``first`` and just after line ``last``."""
        k = bisect.bisect_left([ln.end for ln in self.logical], first)
        j = bisect.bisect_right([ln.start for ln in self.logical], last)
        return (
            self.logical[k - 1] if k > 0 else None,
            self.logical[j] if j < len(self.logical) else None,
        )

    def levels(self, first: int, last: int) -> list[str]:
        """The indentations a statement between lines ``first`` and ``last`` may have.

        After a block header only the block's own indentation; otherwise any level open there
        down to that of the next statement (strictly deeper before ``else``/``except``/...).

        Examples
        --------
        >>> src = read_source("for i in x:\\n    y = i\\n# here\\nz = 1\\n")
        >>> src.levels(3, 3)
        ['', '    ']
        """
        before, after = self.around(first, last)
        if before is None:
            return [""]
        if before.opens_block:
            if after is not None and len(after.indent) > len(before.indent):
                return [after.indent]
            return []
        if after is None:
            return list(before.levels)
        strict = after.first in _CONTINUATIONS
        return [
            lv
            for lv in before.levels
            if len(lv) > len(after.indent) or (not strict and len(lv) == len(after.indent))
        ]


@dataclasses.dataclass
class _Comment:
    row: int
    col: int
    text: str
    standalone: bool
    bracketed: bool


def _tokens(text: str) -> tuple[list[LogicalLine], list[_Comment], set[int]]:
    logical: list[LogicalLine] = []
    comments: list[_Comment] = []
    in_string: set[int] = set()
    levels = [""]
    depth = 0
    code_rows: set[int] = set()
    start: tokenize.TokenInfo | None = None
    last_op = ""
    lines = text.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        kind = tok.type
        if kind == tokenize.INDENT:
            levels.append(tok.string)
        elif kind == tokenize.DEDENT:
            levels.pop()
        elif kind == tokenize.COMMENT:
            comments.append(
                _Comment(
                    tok.start[0],
                    tok.start[1],
                    tok.string,
                    tok.start[0] not in code_rows and depth == 0,
                    depth > 0,
                )
            )
        elif kind == tokenize.NEWLINE:
            if start is not None:
                row = start.start[0]
                indent = lines[row - 1][: start.start[1]]
                logical.append(
                    LogicalLine(
                        row, tok.start[0], indent, start.string, last_op == ":", tuple(levels)
                    )
                )
            start, last_op = None, ""
        elif kind not in (tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER):
            if start is None:
                start = tok
            code_rows.update(range(tok.start[0], tok.end[0] + 1))
            last_op = tok.string if kind == tokenize.OP else "."
            if kind == tokenize.OP and tok.string in "([{":
                depth += 1
            elif kind == tokenize.OP and tok.string in ")]}":
                depth -= 1
            if tok.end[0] > tok.start[0] and kind != tokenize.OP:
                in_string.update(range(tok.start[0] + 1, tok.end[0] + 1))
    return logical, comments, in_string


def _directives(comments: list[_Comment], problems: list[Diagnostic]) -> list[Directive]:
    by_row = {c.row: c for c in comments}
    found: list[Directive] = []
    taken: set[int] = set()
    for c in comments:
        if c.row in taken:
            continue
        m = _DIRECTIVE.match(c.text)
        if m is None:
            if _NEAR_MISS.match(c.text):
                problems.append(
                    Diagnostic(
                        c.row, c.col, "warning", "looks like a directive but is not: write '#$spmd'"
                    )
                )
            continue
        rows: list[int] = []
        clauses: list[Clause] = []
        here: _Comment | None = c
        while here is not None:
            rows.append(here.row)
            taken.add(here.row)
            if not here.standalone:
                where = "inside brackets" if here.bracketed else "after code on its line"
                problems.append(
                    Diagnostic(
                        here.row,
                        here.col,
                        "error",
                        f"a directive must stand on its own line, not {where}",
                    )
                )
            body = here.text[m.end() :]
            stripped = body.rstrip()
            more = stripped.endswith(",")
            if more:
                stripped = stripped[:-1]
            lead = len(stripped) - len(stripped.lstrip())
            at = Pos(here.row, here.col + m.end() + lead)
            if not stripped.strip():
                problems.append(
                    Diagnostic(at.line, at.col, "error", "empty directive: no clause after #$spmd")
                )
            else:
                parsed, errors = parse_clauses(stripped.strip(), at)
                clauses += parsed
                problems += errors
            if not more:
                break
            nxt = by_row.get(here.row + 1)
            m = _DIRECTIVE.match(nxt.text) if nxt is not None else None
            if nxt is None or m is None:
                col = here.col + len(here.text.rstrip()) - 1
                problems.append(
                    Diagnostic(
                        here.row,
                        col,
                        "error",
                        "the directive ends with ',' but the next line is not a #$spmd line",
                    )
                )
                break
            here = nxt
        found.append(Directive(tuple(rows), Pos(c.row, c.col), "", tuple(clauses)))
    return found


def read_source(text: str, path: str = "<program>") -> Source:
    """Tokenize and parse ``text``; collect its directives and any syntax problems.

    A program Python cannot parse gives one error (and no tree); the directive checks need a
    tree, so :mod:`parvox.spmd.checker` stops there.

    Examples
    --------
    >>> read_source("x = (\\n", "bad.py").problems[0].message.startswith("syntax error")
    True
    """
    lines = tuple(text.splitlines())
    problems: list[Diagnostic] = []
    try:
        tree = ast.parse(text, filename=path)
        logical, comments, in_string = _tokens(text)
    except (SyntaxError, tokenize.TokenError) as exc:
        if isinstance(exc, SyntaxError):
            line, col, msg = exc.lineno or 1, max((exc.offset or 1) - 1, 0), exc.msg
        else:
            (msg, (line, col)) = exc.args
        problems.append(Diagnostic(line, col, "error", f"syntax error: {msg}"))
        return Source(path, text, lines, None, (), (), frozenset(), tuple(problems))
    directives = _directives(comments, problems)
    directives = [
        dataclasses.replace(d, indent=lines[d.pos.line - 1][: d.pos.col]) for d in directives
    ]
    return Source(
        path,
        text,
        lines,
        tree,
        tuple(logical),
        tuple(directives),
        frozenset(in_string),
        tuple(problems),
    )
