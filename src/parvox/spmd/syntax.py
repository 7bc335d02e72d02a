"""What the directive checker asks of a program's syntax tree.

The names a program binds, the arrays a loop body indexes with the loop variable, the
statements that would leave a loop early, and whether a statement is a ``for NAME in
range(...)`` loop the translator can rewrite.

Examples
--------
>>> import ast
>>> loop = ast.parse("for i in range(1, 9):\\n    out[i, 1:] = img[i - 1, 1:] + img[i]\\n").body[0]
>>> indexed_arrays(loop.body, "i"), range_loop_problem(loop)
((['out'], ['img']), None)
>>> sorted(assigned_names(ast.parse("import numpy as np\\nx, y = 1, 2\\ndef f(a): pass")))
['a', 'f', 'np', 'x', 'y']
"""

from __future__ import annotations

import ast
from collections.abc import Callable

__all__ = [
    "assigned_names",
    "early_exits",
    "indexed_arrays",
    "range_loop_problem",
    "span_names",
]


def assigned_names(tree: ast.Module) -> set[str]:
    """Every name the program binds anywhere (assignment, loop, import, def, argument, ...)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
    return names


def indexed_arrays(body: list[ast.stmt], var: str) -> tuple[list[str], list[str]]:
    """Arrays indexed with ``var`` first (``a[var]``, ``a[var, ...]``): (written, read)."""
    written: list[str] = []
    read: list[str] = []
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            index = (
                node.slice.elts[0]
                if isinstance(node.slice, ast.Tuple) and node.slice.elts
                else node.slice
            )
            if isinstance(index, ast.Name) and index.id == var:
                into = written if isinstance(node.ctx, ast.Store | ast.Del) else read
                if node.value.id not in into:
                    into.append(node.value.id)
        stack.extend(ast.iter_child_nodes(node))
    return written, read


def early_exits(loop: ast.For) -> list[tuple[ast.stmt, str]]:
    """``break``/``return``/``yield`` that would leave a parallel loop early."""
    found: list[tuple[ast.stmt, str]] = []

    def visit(node: ast.AST, nested_loop: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef
            ):
                continue
            if isinstance(child, ast.Break) and not nested_loop:
                found.append((child, "break"))
            elif isinstance(child, ast.Return):
                found.append((child, "return"))
            elif isinstance(child, ast.Expr) and isinstance(child.value, ast.Yield | ast.YieldFrom):
                found.append((child, "yield"))
            visit(child, nested_loop or isinstance(child, ast.For | ast.While | ast.AsyncFor))

    for stmt in loop.body:
        visit(ast.Module(body=[stmt], type_ignores=[]), False)
    return found


def range_loop_problem(node: ast.stmt | None) -> str | None:
    """Why ``node`` is not a ``for NAME in range(...)`` loop (None when it is)."""
    if not isinstance(node, ast.For):
        return "is not followed by a `for NAME in range(...)` loop"
    if not isinstance(node.target, ast.Name):
        return "needs a loop with one variable: `for NAME in range(...)`"
    it = node.iter
    if not (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "range"
        and 1 <= len(it.args) <= 3
        and not it.keywords
        and not any(isinstance(a, ast.Starred) for a in it.args)
    ):
        return "needs a loop over `range(...)` (start, stop, step as in Python)"
    if node.orelse:
        return "cannot rewrite a loop with an `else:` block"
    return None


_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def span_names(tree: ast.Module, lines: range) -> tuple[list[str], list[ast.Name]]:
    """The variables the statements on ``lines`` assign, and the names they read.

    Assigned: names bound by assignment (``x = ...``) and arrays written in place
    (``a[i] = ...``, ``a += ...``), in first-write order; not the variables of ``for`` loops
    (a parallel loop's variable differs from rank to rank) nor names bound inside functions,
    lambdas or comprehensions. Read: every name loaded.

    Examples
    --------
    >>> tree = ast.parse("x = 1\\nout[0] = x + y\\nz = [k for k in range(3)]\\n")
    >>> names, reads = span_names(tree, range(1, 4))
    >>> names, [n.id for n in reads]
    (['x', 'out', 'z'], ['out', 'x', 'y', 'k', 'range'])
    """
    written: list[str] = []
    reads: list[ast.Name] = []

    def write(name: str) -> None:
        if name not in written:
            written.append(name)

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, _SCOPES)
            if isinstance(node, ast.For | ast.AsyncFor) and child is node.target:
                continue  # a loop's variable stays with the ranks that ran the loop
            if isinstance(child, ast.Name) and top:
                if isinstance(child.ctx, ast.Store):
                    write(child.id)
                elif isinstance(child.ctx, ast.Load):
                    reads.append(child)
            elif (
                isinstance(child, ast.Subscript | ast.Attribute)
                and top
                and isinstance(child.ctx, ast.Store)
            ):
                base = child.value
                while isinstance(base, ast.Subscript | ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name):
                    write(base.id)
            if isinstance(child, ast.Name) and not top and isinstance(child.ctx, ast.Load):
                reads.append(child)
            visit(child, inner)

    for stmt in tree.body:
        _collect(stmt, lines, visit)
    reads.sort(key=lambda n: (n.lineno, n.col_offset))
    return written, reads


def _collect(stmt: ast.stmt, lines: range, visit: Callable[[ast.AST, bool], None]) -> None:
    """Visit the statements that lie wholly on ``lines`` (descending into compound ones)."""
    end = stmt.end_lineno or stmt.lineno
    if stmt.lineno in lines and end in lines:
        visit(ast.Module(body=[stmt], type_ignores=[]), not isinstance(stmt, _SCOPES))
        return
    if stmt.lineno < lines.stop and end >= lines.start:  # it overlaps: look inside
        for field in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(stmt, field, []):
                if isinstance(child, ast.ExceptHandler):
                    for sub in child.body:
                        _collect(sub, lines, visit)
                else:
                    _collect(child, lines, visit)
