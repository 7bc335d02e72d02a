"""The translator: legible output (directives kept, one comment per action) that runs like the
original. Translated programs run here on one rank, in this process; the portability test in
test_examples.py runs them on 1-4 ranks.
"""

from __future__ import annotations

import json
import runpy
import textwrap

import pytest

from parvox.spmd import DirectiveError, check, translate
from parvox.spmd.program import run_translated, translate_file


def _same_run(tmp_path, monkeypatch, source: str, outputs: tuple[str, ...]) -> str:
    """Run ``source`` serially and translated (one rank); their output files must be equal."""
    prog = tmp_path / "prog.py"
    prog.write_text(source)
    for name in ("serial", "translated"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "serial")
    runpy.run_path(str(prog), run_name="__main__")
    monkeypatch.chdir(tmp_path / "translated")
    translated = translate_file(prog, cache=tmp_path / "cache")
    assert run_translated(prog, translated, []) == 0
    for out in outputs:
        assert (tmp_path / "serial" / out).read_bytes() == (
            tmp_path / "translated" / out
        ).read_bytes()
    return translated.read_text()


SMOOTH = """\
'''Docstring of the program.'''

from __future__ import annotations

#$spmd init
import json

import numpy as np

n = 23
img = np.zeros((n, 5))
note = ""  # every rank has the name r2a rebinds
#$spmd ronly
img[...] = np.arange(n * 5.0).reshape(n, 5) % 7
note = '''a string
over lines
  that must not move'''
#$spmd ronly, r2a[P(X=1): img; note]
out = np.zeros_like(img)
hi = -np.inf
#$spmd dopar
for i in range(
    1, n - 1
):
    out[i] = img[i - 1] + img[i] + img[i + 1]
    hi = max(hi, out[i].max())
#$spmd roa[MAX: hi], a2r[P: out]
#$spmd ronly
with open("out.json", "w") as fh:
    json.dump({"out": out.tolist(), "hi": hi, "note": note}, fh)
#$spmd ronly
#$spmd end
"""


def test_directives_stay_and_each_action_has_a_comment(tmp_path, monkeypatch):
    text = _same_run(tmp_path, monkeypatch, SMOOTH, ("out.json",))
    lines = text.splitlines()
    directives = [ln for ln in SMOOTH.splitlines() if ln.lstrip().startswith("#$spmd")]
    assert [ln for ln in lines if ln.lstrip().startswith("#$spmd")] == directives
    # one per action: init, ronly (open, close) twice, r2a of img and of note, dopar, roa, a2r, end
    assert sum(ln.lstrip().startswith("# spmd: ") for ln in lines) == 11
    assert lines[0].startswith("# Translated from prog.py")
    # the runtime import comes after the docstring and the __future__ import
    assert lines.index("from parvox.spmd.runtime import spmd") > lines.index(
        "from __future__ import annotations"
    )
    assert "for i in spmd.my_range(range(\n    1, n - 1\n), out):" in text
    assert "\nover lines\n  that must not move'''" in text  # string lines keep their place
    assert "    note = '''a string" in text
    assert "exec" not in text.replace("# ruff: noqa: E402", "")
    compile(text, "translated.py", "exec")
    got = json.loads((tmp_path / "translated" / "out.json").read_text())
    assert got["note"] == "a string\nover lines\n  that must not move"


BLOCKS = """\
#$spmd init
import json

import numpy as np

data = np.zeros((7, 2))
log = []


def step(k):
\t#$spmd ronly
\tlog.append(k)
\t#$spmd ronly
\tfor i in range(7):
\t\tdata[i] += k
\t#$spmd barrier


for k in range(3):
\tif k % 2:
\t\tstep(k)
\t\t#$spmd ronly, print["odd", k], ronly
\telse:
\t\t#$spmd ronly
\t\t#$spmd ronly
\t\tstep(-k)
\t#$spmd a2a[E: data]
#$spmd ronly, time!
#$spmd ronly, time!, tcpus=1
#$spmd ronly
with open("blocks.json", "w") as fh:
\tjson.dump({"data": data.tolist(), "log": log}, fh)
#$spmd ronly
#$spmd end
"""


def test_blocks_functions_tabs_and_empty_regions(tmp_path, monkeypatch, capsys):
    assert check(BLOCKS) == []
    text = _same_run(tmp_path, monkeypatch, BLOCKS, ("blocks.json",))
    assert "\t\tif spmd.is_root:\n\t\t\tpass  # the region holds no code\n" in text
    assert "\t\tif spmd.is_root:\n\t\t\t# spmd: print" in text
    assert "\tif spmd.is_root:\n\t\tlog.append(k)\n" in text
    assert capsys.readouterr().err.splitlines() == ["odd 1"]  # print[...] goes to stderr


RECURSION = """\
#$spmd init
import numpy as np

rows, cols = 9, 7
s = np.ones((rows, cols))
y = np.arange(rows, dtype=float)
#$spmd pipe[y, 2]
for i in range(2, rows):
    y[i] = y[i - 1] + y[i - 2]
#$spmd pipe[s, 1, 3]
for i in range(1, rows):
    for j in range(1, cols):
        s[i, j] = s[i - 1, j] + s[i, j - 1]
image = np.zeros((rows, 2))
#$spmd dodyn[2, image]
for i in range(rows):
    image[i] = (i, i * i)
#$spmd a2r[P: y, s]
#$spmd ronly
np.save("y.npy", y)
np.save("s.npy", s)
np.save("image.npy", image)
#$spmd ronly
#$spmd end
"""


def test_pipe_and_dodyn_loops_are_rewritten_not_wrapped(tmp_path, monkeypatch):
    text = _same_run(tmp_path, monkeypatch, RECURSION, ("y.npy", "s.npy", "image.npy"))
    assert "for i in spmd.pipe_range(range(2, rows), y, carry=2):\n    y[i] = " in text
    assert (
        textwrap.dedent(
            """\
        for spmd_rows, spmd_cols in spmd.pipe_tiles(range(1, rows), range(1, cols), s, carry=1, chunk=3):
            for i in spmd_rows:
                for j in spmd_cols:
                    s[i, j] = s[i - 1, j] + s[i, j - 1]
        """
        )
        in text
    )
    assert "for i in spmd.dyn_range(range(rows), image, chunk=2):" in text


def test_reductions_and_transfers_render_as_calls():
    text = translate(
        "#$spmd init\nimport numpy as np\nh = np.zeros(3)\ng = h.copy()\nn, m, k = 1, 2, 3\n"
        "#$spmd ror[SUM: h, n; MAX: m], roa[OR: IN=h, OUT=g], r2a[n, m; E: h; P(XC=k): g]\n"
        "#$spmd a2a[P(X=2): g]\n#$spmd end\n",
        "r.py",
    )
    calls = [ln for ln in text.splitlines() if "spmd." in ln and not ln.startswith("#")][2:]
    assert calls == [
        'h, n, m = spmd.ror("sum sum max", h, n, m)',
        'g = spmd.roa_into("lor", h, g)',
        "n, m = spmd.r2a(n, m)",
        "spmd.r2a_entire(h)",
        "spmd.r2a_part(g, halo=k, cyclic=True)",
        "spmd.a2a_halo(g, halo=2)",
        "spmd.end()",
    ]


def test_a_program_with_errors_is_not_translated(tmp_path):
    prog = tmp_path / "bad.py"
    prog.write_text("#$spmd init\n#$spmd dopr\n#$spmd end\n")
    with pytest.raises(DirectiveError) as info:
        translate_file(prog, cache=tmp_path / "cache")
    assert "bad.py:2:8: error: unknown clause 'dopr'" in info.value.report
    assert not (tmp_path / "cache").exists()


def test_translations_are_cached_by_content(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("#$spmd init\nx = 1\n#$spmd end\n")
    first = translate_file(prog, cache=tmp_path)
    assert translate_file(prog, cache=tmp_path) == first
    prog.write_text("#$spmd init\nx = 2\n#$spmd end\n")
    second = translate_file(prog, cache=tmp_path)
    assert second != first and "x = 2" in second.read_text()


def test_shebang_stays_first():
    text = translate("#!/usr/bin/env python\n#$spmd init\nx = 1\n#$spmd end\n", "s.py")
    assert text.startswith("#!/usr/bin/env python\n# Translated from s.py")


def test_a_failure_reports_the_programs_file_and_line_not_the_translation(tmp_path):
    from parvox.spmd.program import ProgramFailed

    prog = tmp_path / "bad4.py"
    prog.write_text(
        "#$spmd init\nimport numpy as np\n\nvalues = {'a': 1}\n#$spmd ronly\nprint('start')\n"
        "#$spmd ronly\nfor k in ('a', 'b'):\n    print(values[k])\n#$spmd end\n"
    )
    translated = translate_file(prog, cache=tmp_path / "cache")
    assert translated.with_suffix(".lines").exists()
    with pytest.raises(ProgramFailed) as info:
        run_translated(prog, translated, [])
    report = info.value.report
    frames = [ln.strip() for ln in report.splitlines() if ln.strip().startswith("File ")]
    assert frames == [f'File "{prog}", line 9, in <module>'], report
    assert "    print(values[k])\n" in report
    assert report.rstrip().endswith("KeyError: 'b'")
