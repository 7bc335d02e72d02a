"""The seed reports and the scaling sweep parse their arguments (no MPI job is started)."""

import importlib
import sys
from pathlib import Path

import pytest

SEEDS = Path(__file__).resolve().parents[2] / "bench" / "seeds"
SCRIPTS = ["seed000", "seed001", "seed002", "seed003", "seed004", "scaling"]


@pytest.fixture(scope="module")
def load():
    sys.path.insert(0, str(SEEDS))  # _common puts bench/ itself on the path
    sys.path.insert(0, str(SEEDS.parent))
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(str(SEEDS))
        sys.path.remove(str(SEEDS.parent))


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_names_the_options(name, load, capsys):
    module = load(name)
    with pytest.raises(SystemExit) as exc:
        module.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--quick" in out and "--ranks" in out
    if name != "scaling":
        assert "--oversubscribe" in out and "--out" in out


@pytest.mark.parametrize("name, argv", [
    ("seed002", ["--disk-mbps", "0"]),
    ("seed003", ["--ranks-per-node", "0"]),
    ("scaling", ["nosuch"]),
    ("scaling", ["fft", "--threads", "0"]),
    ("scaling", ["fft", "--quick", "--large"]),
])
def test_bad_arguments_are_refused(name, argv, load, capsys):
    with pytest.raises(SystemExit) as exc:
        load(name).main(argv)
    assert exc.value.code == 2
    assert "argument" in capsys.readouterr().err or name == "scaling"


def test_scaling_sizes_grow_quick_full_large(load):
    scaling = load("scaling")
    parse = scaling.argparse.Namespace
    for name, w in scaling.WORKLOADS.items():
        quick, full, large = (w.sizes[scaling.size_set(parse(quick=q, large=g))]
                              for q, g in ((True, False), (False, False), (False, True)))
        assert quick < full < large, name


def test_rank_counts_above_the_cores_are_skipped_and_said(load, capsys, monkeypatch):
    common = load("_common")
    monkeypatch.setattr(common, "cores", lambda: 2)
    assert common.usable_ranks([1, 2, 4, 16], False) == [1, 2]
    assert "skipping [4, 16] ranks" in capsys.readouterr().err
    assert common.usable_ranks([1, 4], True) == [1, 4]
    assert common.parse_ranks("4,1,2,2") == [1, 2, 4]
    with pytest.raises(SystemExit):
        common.parse_ranks("0,1")
