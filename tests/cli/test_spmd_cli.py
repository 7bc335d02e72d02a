"""``parvox spmd check|translate|run``: diagnostics and exit codes, the -o file, running on N ranks."""

from __future__ import annotations

import pytest

from parvox.cli import main
from parvox.spmd import translate

from ..spmd._programs import PROGRAMS, corrected
from ._helpers import check_ok, run_parvox

GOOD = """\
#$spmd init
import sys

import numpy as np

a = np.zeros((7, 2))
#$spmd dopar
for i in range(7):
    a[i] = i
#$spmd a2r[P: a]
#$spmd ronly, print["ranks:", spmd.size]
print("args", sys.argv[1:], "sum", int(a.sum()))
#$spmd ronly
#$spmd end
"""
BAD = "#$spmd init\nx = 1\n#$spmd dopr, a2r[E: x]\n#$spmd end\n"


@pytest.fixture
def progs(tmp_path, monkeypatch):
    monkeypatch.setenv("PARVOX_SPMD_CACHE", str(tmp_path / "cache"))
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "warn.py").write_text("#$spmd init\nprint(1)\n#$spmd end\n")
    return tmp_path


def test_check_reports_errors_with_line_and_caret_and_exits_2(progs, capsys):
    path = str(progs / "bad.py")
    assert main(["spmd", "check", path]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{path}:3:8: error: unknown clause 'dopr'; clauses are init, end, barrier, ronly, time, "
        "ttime, print, dopar, dodyn, pipe, r2a, a2r, a2a, ror, roa, tcpus, ncpus, parblock, section, root_share",
        "    #$spmd dopr, a2r[E: x]",
        "           ^",
        f"{path}:3:18: error: a2r moves parts only: write a2r[P: x] (E: is an entire array; use "
        "a2a[E: ...] to give every rank all of it)",
        "    #$spmd dopr, a2r[E: x]",
        "                     ^",
        f"{path}: 2 errors, 0 warnings",
    ]


def test_check_passes_a_clean_program_and_warns_without_failing(progs, capsys):
    assert main(["spmd", "check", str(progs / "good.py")]) == 0
    assert capsys.readouterr().out == f"{progs / 'good.py'}: no problems found\n"
    assert main(["spmd", "check", str(progs / "warn.py")]) == 0
    assert "warning: print() outside a ronly region" in capsys.readouterr().out


def test_translate_writes_the_translation(progs, capsys):
    out = progs / "good_translated.py"
    assert main(["spmd", "translate", str(progs / "good.py"), "-o", str(out)]) == 0
    assert out.read_text() == translate(GOOD, "good.py")
    assert main(["spmd", "translate", str(progs / "good.py")]) == 0
    assert capsys.readouterr().out == translate(GOOD, "good.py")


@pytest.mark.parametrize(
    ("argv", "argument", "words"),
    [
        (
            ["translate", "{d}/bad.py", "-o", "{d}/t.py"],
            "argument PROG",
            "2 errors in its #$spmd",
        ),
        (
            ["translate", "{d}/good.py", "-o", "{d}/no/t.py"],
            "argument -o/--output",
            "does not exist",
        ),
        (["translate", "{d}/good.py", "-o", "{d}/good.py"], "argument -o/--output", "PROG itself"),
        (["check", "{d}/missing.py"], "argument PROG", "no such file"),
        (["check", "{d}"], "argument PROG", "is a directory"),
        (["run", "{d}/bad.py", "-n", "2"], "argument PROG", "2 errors"),
        (["run", "{d}/good.py", "-n", "0"], "argument -n/--nprocs", "must be >= 1"),
        (["run", "{d}/good.py", "-n", "x"], "argument -n/--nprocs", "invalid int value"),
        (["run", "{d}/good.py", "--fast"], "unknown option '--fast'", "after --"),
        (["run"], "PROG", "required"),
        (["-n", "2", "check", "{d}/good.py"], "argument -n/--nprocs", "only `parvox spmd run`"),
        (["check", "{d}/good.py", "-n", "2"], "unrecognized arguments", "-n 2"),
    ],
)
def test_bad_input_exits_2_naming_the_argument(progs, capsys, argv, argument, words):
    with pytest.raises(SystemExit) as info:
        main(["spmd", *(a.format(d=progs) for a in argv)])
    assert info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert argument in last and words in last, last
    assert not (progs / "t.py").exists()


def test_run_relaunches_on_n_ranks_with_the_programs_arguments(progs):
    proc = run_parvox("spmd", "run", str(progs / "good.py"), "-n", "3", "--", "in.npy", "--fast")
    check_ok(proc)
    assert proc.stdout == "args ['in.npy', '--fast'] sum 42\n"
    assert proc.stderr == "ranks: 3\n"
    proc = run_parvox("spmd", "-n", "2", "run", str(progs / "good.py"), "x")
    check_ok(proc)
    assert (proc.stdout, proc.stderr) == ("args ['x'] sum 42\n", "ranks: 2\n")


def test_run_inside_an_external_mpiexec_uses_the_world(progs):
    proc = run_parvox("spmd", "run", str(progs / "good.py"), mpiexec=4)
    check_ok(proc)
    assert (proc.stdout, proc.stderr) == ("args [] sum 42\n", "ranks: 4\n")


def test_run_reports_directive_errors_once_before_any_launch(progs):
    proc = run_parvox("spmd", "run", str(progs / "bad.py"), mpiexec=3)
    assert proc.returncode == 2
    assert proc.stderr.count("unknown clause 'dopr'") == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("parvox spmd run: error: argument PROG")


def test_a_failing_rank_aborts_the_job_and_exit_codes_pass_through(progs):
    (progs / "fail.py").write_text(
        "#$spmd init\nimport numpy as np\na = np.zeros((6, 1))\n#$spmd dopar\nfor i in range(6):\n"
        "    a[i] = 1 / (i != 5)\n#$spmd a2r[P: a]\n#$spmd end\n"
    )
    proc = run_parvox("spmd", "run", str(progs / "fail.py"), "-n", "3", timeout=60)
    assert proc.returncode != 0
    assert "parvox: rank 2 failed: ProgramFailed: fail.py failed: ZeroDivisionError" in proc.stderr
    assert "a[i] = 1 / (i != 5)" in proc.stderr  # the traceback shows the program's line
    (progs / "exit.py").write_text("#$spmd init\nimport sys\n#$spmd end\nsys.exit(3)\n")
    assert run_parvox("spmd", "run", str(progs / "exit.py"), "-n", "2").returncode == 3


SMOOTH = """\
#$spmd init
import numpy as np
img = np.zeros((512, 512))
#$spmd ronly
img[...] = np.load("in.npy")
#$spmd ronly, r2a[P(X=1): img]
out = np.zeros_like(img)
hi = -np.inf
#$spmd dopar
for i in range(1, 511):
    out[i, 1:-1] = (img[i - 1, 1:-1] + img[i, 1:-1] + img[i + 1, 1:-1]) / 3
    hi = max(hi, out[i].max())
#$spmd roa[MAX: hi], a2r[P: out]
#$spmd ronly
np.save("out.npy", out / hi)
#$spmd ronly
#$spmd end
"""


def test_the_issue_example_runs_unchanged_as_python_and_on_4_ranks(progs, monkeypatch):
    import subprocess
    import sys

    import numpy as np

    np.save(progs / "in.npy", np.random.default_rng(16).random((512, 512)))
    (progs / "smooth.py").write_text(SMOOTH)
    monkeypatch.chdir(progs)
    subprocess.run([sys.executable, "smooth.py"], check=True, timeout=120)
    serial = np.load("out.npy")
    (progs / "out.npy").unlink()
    check_ok(run_parvox("spmd", "run", "smooth.py", "-n", "4"))
    assert np.array_equal(np.load("out.npy"), serial)


# ------------------------------------------------------------------ issue 27


def test_verify_fails_at_the_first_difference_and_passes_a_correct_program(tmp_path, monkeypatch):
    monkeypatch.setenv("PARVOX_SPMD_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    proc = run_parvox("spmd", "run", str(PROGRAMS / "computed.py"), "-n", "3", "--verify")
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        "parvox spmd: error: --verify: 3 ranks differ from the serial run: stdout line 2 "
        "differs: serially 'sum 21320', in parallel 'sum 14440'"
    )
    assert proc.stdout == "rows 40\nsum 14440\n"  # the parallel run's output, passed on
    assert sorted(p.name for p in work.iterdir()) == []  # nothing of a failed verify is kept
    (tmp_path / "computed_fixed.py").write_text(corrected("computed"))
    proc = run_parvox("spmd", "run", "--verify", str(tmp_path / "computed_fixed.py"), "-n", "2")
    check_ok(proc)
    assert proc.stdout == "rows 40\nsum 21320\n"
    assert "matches the serial run (stdout and 1 file)" in proc.stderr
    assert sorted(p.name for p in work.iterdir()) == ["out.npy"]


def test_verify_compares_the_files_written(tmp_path, monkeypatch):
    from parvox.spmd.verify import first_difference, outputs

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"abc")
    (tmp_path / "link").symlink_to(tmp_path / "a" / "x.bin")
    assert outputs(tmp_path) == {"a/x.bin": b"abc"}  # links (the inputs) are not outputs
    assert (
        first_difference(b"1\n", b"1\n", {"x": b"abc"}, {"x": b"abd"}) == "x differs (byte 2 of 3)"
    )
    assert first_difference(b"", b"", {"x": b""}, {}) == "x is written serially but not in parallel"
    assert first_difference(b"1\n", b"1\n2\n", {}, {}) == "stdout line 2 is extra in parallel: '2'"


def test_verify_refuses_to_run_inside_an_external_mpiexec(progs):
    proc = run_parvox("spmd", "run", str(progs / "good.py"), "--verify", mpiexec=2)
    assert proc.returncode == 2
    assert "argument --verify" in proc.stderr


BAD9 = """\
#$spmd init
import numpy as np
a = np.zeros((6, 2))
#$spmd ronly
print("start")
#$spmd ronly
#$spmd dopar
for i in range(6):
    a[i] = 1 / (i != 5) + a[i, 0]
#$spmd a2r[P: a]
#$spmd end
"""


def test_a_runtime_error_points_at_the_program_line_without_parvox_frames(progs):
    (progs / "bad9.py").write_text(BAD9)
    proc = run_parvox("spmd", "run", str(progs / "bad9.py"), "-n", "3", timeout=60)
    assert proc.returncode != 0
    err = proc.stderr
    assert f'File "{progs / "bad9.py"}", line 9, in <module>' in err, err
    assert "    a[i] = 1 / (i != 5) + a[i, 0]" in err
    assert "ZeroDivisionError: division by zero" in err
    assert "parvox: rank 2 failed: ProgramFailed: bad9.py failed: ZeroDivisionError" in err
    assert str(progs / "cache") not in err and "parvox/spmd" not in err, err
    frames = [ln for ln in err.splitlines() if ln.lstrip().startswith("File ")]
    assert frames and all("bad9.py" in f for f in frames), err  # the program's frames only


def test_a_failing_directive_points_at_the_directive(progs):
    (progs / "bad10.py").write_text("#$spmd init\na = 3\n#$spmd r2a[P: a]\n#$spmd end\n")
    proc = run_parvox("spmd", "run", str(progs / "bad10.py"), "-n", "2", timeout=60)
    assert proc.returncode != 0
    assert f'File "{progs / "bad10.py"}", line 3, in <module>' in proc.stderr, proc.stderr
    assert "    #$spmd r2a[P: a]" in proc.stderr
    frames = [ln for ln in proc.stderr.splitlines() if ln.lstrip().startswith("File ")]
    assert frames and all("bad10.py" in f for f in frames), proc.stderr  # no parvox frames
