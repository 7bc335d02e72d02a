"""The distribution checks of a parallel loop: what its iterations read and what it leaves.

Each rank runs only its own iterations of a ``dopar`` (its rows), ``pipe`` (its rows, after
the carried rows of the rank before) or ``dodyn`` loop (whatever chunks the root hands it).
:func:`check_parallel_loop` checks every read in the body against the state of the variable
read (:mod:`parvox.spmd.states`): ``a[i + k]`` needs ``|k|`` neighbour rows, a read the
checker cannot follow is a note, a partial result needs its reduction first; it also refuses
writes to rows another rank owns and loop-carried reads ``dopar`` cannot split. After the
loop the rows written are each rank's parts, and every variable the body updates is each
rank's partial result.

Examples
--------
>>> from parvox.spmd import check
>>> text = "#$spmd init\\nimport numpy as np\\na = np.ones(9)\\n#$spmd dopar\\nfor i in range(1, 9):\\n    a[i] += a[i - 1]\\n#$spmd end\\n"
>>> print(check(text)[0].message.split(";")[0])
`a[i - 1]` reads a row that an earlier iteration of this dopar loop writes: the iterations depend on each other, which dopar cannot split
"""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING

from parvox.spmd.accesses import (
    AUG,
    MUTATORS,
    accumulation,
    bound_names,
    first_index,
    name_reads,
    row_offset,
    row_reach,
    wraps,
)
from parvox.spmd.states import FULL, Origin, State, explain

if TYPE_CHECKING:
    from parvox.spmd.checker import LoopPlan
    from parvox.spmd.distribution import Flow

__all__ = ["check_parallel_loop"]


def check_parallel_loop(flow: Flow, node: ast.For, plan: LoopPlan, line: int) -> None:
    """Check the reads of a ``dopar``/``dodyn``/``pipe`` loop; set what it leaves behind.

    ``line`` is the loop directive's line, where a missing directive goes before.
    """
    word = plan.clause.keyword
    assert isinstance(node.target, ast.Name)
    var = node.target.id
    flow.value(node.iter)
    local = bound_names(node.body) | {var}
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
                        k = row_offset(first_index(e), var)
                        if k == 0:
                            row_written.add(e.value.id)
                        elif k is not None:
                            flow.say(
                                e,
                                (e.value.id, line),
                                f"`{flow.text(e)} = ...` writes a row of another rank's part: "
                                f"each rank runs the iterations of its own rows of the {word} "
                                f"loop of line {line}; write {e.value.id}[{var}, ...] (shift "
                                f"the loop range instead)",
                            )
                        elif e.value.id not in local:
                            op = AUG.get(type(n.op), "") if isinstance(n, ast.AugAssign) else ""
                            written.setdefault(e.value.id, op)
                    elif isinstance(e, ast.Name) and isinstance(e.ctx, ast.Store):
                        op = accumulation(n, e.id) if isinstance(n, ast.stmt) else ""
                        if e.id in written and written[e.id] != op:
                            op = ""
                        written[e.id] = op
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Name)
                and n.func.attr in MUTATORS
                and n.func.value.id in flow.state
                and n.func.value.id not in local
            ):
                written.setdefault(n.func.value.id, "")
    uses = sorted(
        (
            (name, sub)
            for stmt in node.body
            for name, sub in name_reads(stmt)
            if name.id not in local and name.id in flow.state
        ),
        key=lambda u: (u[0].lineno, u[0].col_offset),
    )
    needs: dict[str, int] = {}
    for name, sub in uses:
        reach = row_reach(first_index(sub), var) if sub is not None else None
        if reach is not None:
            need = max(-reach[0], reach[1], 0)
            needs[name.id] = max(need, needs.get(name.id, 0))
    for name, sub in uses:
        _loop_read(flow, needs, word, plan, name, sub, var, line, start, row_written)
    origin_rows = Origin(word, line, "")
    for array in row_written:
        if word == "dodyn" and array == plan.arrays[0]:
            flow.put(array, State(True, None, origin=dataclasses.replace(origin_rows, name=array)))
        elif word == "dodyn":
            flow.put(array, State(False, None, origin=dataclasses.replace(origin_rows, name=array)))
        else:
            flow.put(array, State(False, 0, origin=dataclasses.replace(origin_rows, name=array)))
    for array, op in written.items():
        if array not in row_written:
            o = Origin(word, line, array)
            flow.put(array, State(False, None, False, op, o))


def _loop_read(
    flow: Flow,
    needs: dict[str, int],
    word: str,
    plan: LoopPlan,
    name: ast.Name,
    sub: ast.Subscript | None,
    var: str,
    line: int,
    start: int | None,
    row_written: set[str],
) -> None:
    n = name.id
    st = flow.state[n]
    key = (n, line)
    if flow.unbound(n, name, line):
        return
    first = first_index(sub) if sub is not None else None
    reach = row_reach(first, var) if first is not None else None
    if n in row_written and reach is not None:
        if word == "pipe" and n == plan.arrays[0]:
            return
        if reach == (0, 0):
            return
        if word == "dopar" and reach[0] < 0:
            assert sub is not None
            flow.say(
                sub,
                key,
                f"`{flow.text(sub)}` reads a row that an earlier iteration of this dopar loop "
                f"writes: the iterations depend on each other, which dopar cannot split; use "
                f"`#$spmd pipe[{n}, {-reach[0]}]` at line {line}",
            )
            return
    if st.rows == FULL and st.partial is None:
        return
    what = flow.text(sub) if sub is not None else n
    is_array = n in flow.arrays
    if st.partial is not None:
        op = st.partial or "SUM"
        fix = f"combine the ranks' results with `#$spmd roa[{op}: {st.origin.name if st.origin else n}]` before line {line}"
        if not st.partial:
            fix = "its value differs from rank to rank; set it outside the parallel loop or reduce it with roa"
        flow.say(name, key, f"the {word} loop reads `{n}`, but it is {explain(n, st)}: {fix}")
        return
    if word == "dodyn":
        if n == plan.arrays[0] and reach == (0, 0):
            return
        send = f"r2a[E: {n}]" if st.root else f"a2a[E: {n}]"
        flow.say(
            name,
            key,
            f"dodyn hands rows to whichever rank asks, so every rank needs all of `{n}`, but "
            f"it is {explain(n, st)}: send it with `#$spmd {send}` before line {line}",
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
            fix = (
                f"send each rank its part with `#$spmd r2a[{'P' if h == 0 else f'P(X={h})'}: {n}]`"
            )
            if not st.root:
                fix = f"give every rank its part (`#$spmd r2a[P: {n}]` from a root that holds it)"
        else:
            fix = (
                f"send it whole with `#$spmd r2a[E: {n}]`"
                if st.root
                else "give every rank all of it"
            )
        flow.say(
            name,
            key,
            f"the {word} loop reads `{what}` on every rank, but `{n}` is {explain(n, st)}: "
            f"{fix} before line {line}",
        )
        return
    if reach is not None and wraps(first, var) and not st.cyclic:
        reach = None  # wraps at the ends, which only a cyclic exchange brings
    if reach is None:
        if sub is None and not is_array:
            return
        flow.say(
            sub or name,
            key,
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
        need = needs.get(n, need)
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
                f"{n} is {explain(n, st)}: exchange the neighbour rows with "
                f"`#$spmd a2a[P(X={need}): {n}]` before line {line}"
            )
        flow.say(
            sub,
            key,
            f"`{what}` reads {need} row(s) beyond each rank's part, but {fix}",
        )
        return
    if start is not None and start + reach[0] < 0 and not st.cyclic and st.rows != FULL:
        flow.say(
            sub,
            key,
            f"at {var} = {start}, `{what}` reads row {start + reach[0]}, which Python takes "
            f"from the end of `{n}`; no rank holds those rows next to the first part: "
            f"use the cyclic `P(XC={need}): {n}` or start the loop at {-reach[0]}",
        )
