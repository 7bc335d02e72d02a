"""``#$spmd`` directives: parallelise a serial Python program with comment lines (seed 003, SPMDdir).

A program with directives still runs serially (they are comments). :func:`translate` turns it
into legible Python that calls :mod:`parvox.spmd.runtime`, and ``parvox spmd run prog.py -n 4``
runs that translation on 4 ranks. The pieces:

- :mod:`parvox.spmd.language`: the clauses and their grammar;
- :mod:`parvox.spmd.source`: reading a program (tokens, logical lines, directives);
- :mod:`parvox.spmd.syntax` and :mod:`parvox.spmd.checker`: checking and placing the directives
  (:func:`check`);
- :mod:`parvox.spmd.distribution` (with :mod:`~parvox.spmd.states`,
  :mod:`~parvox.spmd.accesses`, :mod:`~parvox.spmd.loopreads`): which part of each variable
  each rank holds, and the reads of data a rank does not hold;
- :mod:`parvox.spmd.translator`: rendering the translation (:func:`translate`);
- :mod:`parvox.spmd.runtime` and :mod:`parvox.spmd.transfers`: what translated programs call;
- :mod:`parvox.spmd.program`: translating files with a cache and running them
  (:mod:`parvox.spmd.linemap`: tracebacks at the program's own lines);
- :mod:`parvox.spmd.verify`: ``parvox spmd run --verify``, a serial and a parallel run compared.

Examples
--------
>>> program = "#$spmd init\\ntotal = 0\\n#$spmd dopar[x]\\nfor i in range(4):\\n    total += i\\n#$spmd end\\n"
>>> [d.message for d in check(program)]
['`x` is never assigned in the program']
>>> translate(program.replace("dopar[x]", "dopar"), "p.py")
Traceback (most recent call last):
...
parvox.spmd.diagnostics.DirectiveError: p.py: 1 error in the #$spmd directives
p.py:3:8: error: dopar: the loop body indexes no array with `i` (as in `a[i, ...]`); name the array whose rows split the loop: dopar[a]
    #$spmd dopar
           ^
"""

from parvox.spmd.checker import analyse, check
from parvox.spmd.diagnostics import Diagnostic, DirectiveError
from parvox.spmd.source import read_source
from parvox.spmd.translator import translate

__all__ = ["Diagnostic", "DirectiveError", "analyse", "check", "read_source", "translate"]
