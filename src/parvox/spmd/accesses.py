"""What the distribution checker reads off a program's syntax: indices, reads, accumulations.

Inside a parallel loop over ``i`` an index ``i + k`` reads the row ``k`` away from the
iteration's own (:func:`offset`, :func:`reach`; ``(i + k) % n`` wraps, :func:`wraps`);
:func:`name_reads` finds every read of a name with the subscript it goes through, leaving out
those that use only the shape (``len(a)``, ``a.shape``, ``np.zeros_like(a)``) and plain
writes; :func:`accumulation` tells which reduction a loop's update of a variable looks like.

Examples
--------
>>> import ast
>>> [row_offset(ast.parse(t).body[0].value, "i") for t in ("i", "i - 2", "1 + i", "2 * i")]
[0, -2, 1, None]
>>> loop = ast.parse("for i in range(9):\\n    hi = max(hi, a[i + 1])").body[0]
>>> [(n.id, s is not None) for n, s in name_reads(loop.body[0])], accumulation(loop.body[0], "hi")
([('max', False), ('hi', False), ('a', True), ('i', False)], 'MAX')
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

__all__ = [
    "AUG",
    "LIKE",
    "MUTATORS",
    "REDUCERS",
    "SHAPE_ATTRS",
    "accumulation",
    "bound_names",
    "callee",
    "first_index",
    "has_axis",
    "is_full",
    "name_reads",
    "row_offset",
    "row_reach",
    "wraps",
]

SHAPE_ATTRS = frozenset({"shape", "dtype", "ndim", "size", "itemsize", "nbytes"})
LIKE = frozenset({"len", "zeros_like", "ones_like", "empty_like", "full_like", "shape", "ndim"})
REDUCERS = frozenset(
    {
        "sum",
        "mean",
        "max",
        "min",
        "amax",
        "amin",
        "std",
        "var",
        "prod",
        "median",
        "any",
        "all",
        "average",
        "count_nonzero",
        "nanmax",
        "nanmin",
        "nansum",
        "nanmean",
        "ptp",
        "percentile",
        "quantile",
        "histogram",
        "bincount",
        "unique",
        "dot",
        "vdot",
        "norm",
        "argmax",
        "argmin",
        "item",
        "tolist",
        "tobytes",
        "float",
        "int",
        "bool",
        "round",
    }
)
MUTATORS = frozenset(
    {"append", "extend", "add", "update", "insert", "fill", "sort", "pop", "remove", "clear"}
)
AUG = {ast.Add: "SUM", ast.Sub: "SUM", ast.Mult: "PROD", ast.BitOr: "OR", ast.BitAnd: "AND"}


def first_index(node: ast.Subscript) -> ast.expr:
    s = node.slice
    return s.elts[0] if isinstance(s, ast.Tuple) and s.elts else s


def is_full(index: ast.expr) -> bool:
    if isinstance(index, ast.Constant) and index.value is Ellipsis:
        return True
    return isinstance(index, ast.Slice) and not (index.lower or index.upper or index.step)


def row_offset(index: ast.expr | None, var: str) -> int | None:
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


def wraps(index: ast.expr | None, var: str) -> bool:
    """Whether ``index`` is ``(var + k) % n``: a neighbour row taken cyclically."""
    return (
        isinstance(index, ast.BinOp)
        and isinstance(index.op, ast.Mod)
        and row_offset(index.left, var) is not None
    )


def row_reach(index: ast.expr, var: str) -> tuple[int, int] | None:
    """The rows ``var + lo .. var + hi`` an index reads, when the checker can tell."""
    if wraps(index, var):
        assert isinstance(index, ast.BinOp)
        index = index.left
    k = row_offset(index, var)
    if k is not None:
        return k, k
    if isinstance(index, ast.Slice) and not index.step and index.lower and index.upper:
        lo, hi = row_offset(index.lower, var), row_offset(index.upper, var)
        if lo is not None and hi is not None and hi > lo:
            return lo, hi - 1
    return None


def bound_names(body: Sequence[ast.stmt]) -> set[str]:
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


def name_reads(expr: ast.AST) -> Iterator[tuple[ast.Name, ast.Subscript | None]]:
    """Every read of a name with the subscript it is read through; shape-only reads skipped."""
    skip: set[int] = set()
    for n in ast.walk(expr):
        if isinstance(n, ast.Attribute) and n.attr in SHAPE_ATTRS:
            skip.add(id(n.value))
        elif isinstance(n, ast.Call) and n.args and callee(n) in LIKE:
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


def callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def has_axis(call: ast.Call) -> bool:
    for kw in call.keywords:
        if kw.arg == "axis":
            v = kw.value
            return not (isinstance(v, ast.Constant) and v.value in (0, None))
    if isinstance(call.func, ast.Attribute) and call.args:
        a = call.args[0]
        return not (isinstance(a, ast.Constant) and a.value in (0, None))
    return False


def accumulation(stmt: ast.stmt, name: str) -> str:
    """The reduction a statement that updates ``name`` in a parallel loop looks like."""
    if isinstance(stmt, ast.AugAssign):
        return AUG.get(type(stmt.op), "")
    value = getattr(stmt, "value", None)
    if isinstance(value, ast.Call) and callee(value) in ("max", "min", "maximum", "minimum"):
        if any(isinstance(a, ast.Name) and a.id == name for a in value.args):
            return "MAX" if "max" in callee(value) else "MIN"
    if isinstance(value, ast.BinOp) and isinstance(value.left, ast.Name) and value.left.id == name:
        return AUG.get(type(value.op), "")
    if isinstance(value, ast.BoolOp) and any(
        isinstance(v, ast.Name) and v.id == name for v in value.values
    ):
        return "OR" if isinstance(value.op, ast.Or) else "AND"
    return ""
