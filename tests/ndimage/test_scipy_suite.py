"""scipy.ndimage's own test suite as the oracle for parvox.ndimage, at three MPI configurations.

scipy's ``test_filters.py``, ``test_measurements.py`` and ``test_morphology.py`` (of the
installed scipy) run with every ``ndimage.<f>`` that parvox implements replaced by "distribute
the arrays, call ``parvox.ndimage.<f>``, gather the result" (``scipy_oracle.py``). One
``mpiexec`` launch per configuration runs them; every test that reaches parvox must pass,
except the few listed in :data:`KNOWN`, each with its reason.

What each configuration proves (:data:`CONFIGS`):

- **4 ranks, 11 uneven blocks round-robin** runs the whole suite (about 3400 tests reach
  parvox): every parametrization (dtype, mode, origin, axes...) against the strongest
  distribution -- blocks of unequal sizes, several per rank and not adjacent on one rank, so
  halos cross ranks and blocks of one rank alike. It alone also checks that :data:`KNOWN` is
  complete and not stale for every parametrization. It belongs to the long tier (marked
  ``scale``: ``./test -m scale``, which CI runs after ``./test``); a plain ``./test`` runs the
  same distribution on the first parametrization and an eighth of the others (``--thin 8
  --thin-offset 4``; a quarter took 81 s of a clean clone's ``./test``, which must stay under
  15 minutes).
- **3 ranks** (the default layout: one block per rank, an odd count that splits most of
  scipy's arrays unevenly)
  runs each scipy test's first parametrization and the other eighth (``--thin 8``, offset 0,
  about 700 tests): every scipy test function at a second distribution and rank count. The two
  eighths are the quarter both launches ran until 2026-11-27, each now at one distribution.
- **1 rank** runs each scipy test's first parametrization (``--thin 0``, about 360 tests): the
  adapter and every parvox function's purely local path, so a failure that shows at 3 or 4
  ranks but not here is a distribution bug. Its other parametrizations differ from the first in
  what NumPy/SciPy do locally, which the distributed configurations cover.

The parametrizations the thinned configurations skip hit the same parvox code paths many
times over (one mpiexec per configuration; the full suite at 3 and 1 ranks cost another 100 s
on two cores). Each configuration must reach parvox from at least its ``min_selected`` tests:
a broken adapter (``ndimage`` not bound to parvox) reaches it from none.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from parvox.launch import launch_command

ORACLE = str(Path(__file__).with_name("scipy_oracle.py"))

#: name -> (ranks, DistArray layout keywords, the oracle's --thin and --thin-offset,
#: min_selected)
CONFIGS = {
    "1 rank, first parametrizations": (1, {}, (0, 0), 330),
    "3 ranks, an eighth of the parametrizations": (3, {}, (8, 0), 600),
    "4 ranks, 11 uneven blocks round-robin, the other eighth": (
        4, {"nblocks": 11, "assignment": "round_robin"}, (8, 4), 600
    ),
    "4 ranks, 11 uneven blocks round-robin, all": (
        4, {"nblocks": 11, "assignment": "round_robin"}, (1, 0), 3000
    ),
}
#: configurations of the long tier (``./test -m scale``, which ``.ci/run`` runs after
#: ``./test``): the whole suite at 4 ranks took 131 s of a clean clone's ``./test``
LONG = {"4 ranks, 11 uneven blocks round-robin, all"}

_ZERO_D = "0-d input: a DistArray has at least one axis, a 0-d array has nothing to distribute"
_OUTPUT_ARRAY = (
    "a NumPy output array of another shape than input: parvox takes a DistArray (or a dtype) "
    "as output, so it raises TypeError where scipy raises ValueError"
)
#: scipy tests parvox does not pass, by file::test (all parametrizations), and why
KNOWN = {
    "test_measurements.py::test_label01": _ZERO_D,
    "test_measurements.py::test_label02": _ZERO_D,
    "test_measurements.py::test_sum03": _ZERO_D,
    "test_measurements.py::test_find_objects01": _ZERO_D,
    "test_measurements.py::test_find_objects02": _ZERO_D,
    "test_morphology.py::test_binary_erosion01": _ZERO_D,
    "test_morphology.py::test_binary_erosion02": _ZERO_D,
    "test_morphology.py::test_binary_dilation01": _ZERO_D,
    "test_morphology.py::test_binary_dilation02": _ZERO_D,
    "test_morphology.py::test_binary_dilation36": _ZERO_D,
    "test_morphology.py::test_distance_transform_edt5": _ZERO_D,
    "test_measurements.py::test_label_output_wrong_size": _OUTPUT_ARRAY,
}


def _key(nodeid: str) -> str:
    """``file.py::test`` of a node id (class and parameters dropped)."""
    path, _, rest = nodeid.partition("::")
    return f"{Path(path).name}::{rest.split('::')[-1].split('[')[0]}"


@pytest.mark.mpi
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(
    "config", [pytest.param(c, marks=pytest.mark.scale) if c in LONG else c for c in CONFIGS]
)
def test_scipy_ndimage_suite(config: str, tmp_path: Path) -> None:
    nprocs, layout, thin, min_selected = CONFIGS[config]
    prefix = tmp_path / "report"
    argv = [ORACLE, "--layout", json.dumps(layout), "--thin", str(thin[0]), "--thin-offset",
            str(thin[1]), "--report", str(prefix)]
    proc = subprocess.run(
        launch_command(nprocs, argv), capture_output=True, text=True, timeout=1700
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"the oracle's mpiexec failed ({proc.returncode}):\n{output[-6000:]}"
    reports = [
        json.loads(Path(f"{prefix}.rank{r}.json").read_text())["tests"] for r in range(nprocs)
    ]
    tests = reports[0]
    for r, other in enumerate(reports[1:], 1):
        differ = [k for k in tests if other.get(k, [None])[0] != tests[k][0]]
        assert not differ, f"rank {r} saw other outcomes than rank 0: {differ[:10]}"
    selected = {k: v for k, v in tests.items() if v[1]}
    assert len(selected) >= min_selected, f"only {len(selected)} scipy tests reached parvox"
    failed = {k: v for k, v in selected.items() if v[0] == "failed"}
    unexpected = {k: v[2] for k, v in failed.items() if _key(k) not in KNOWN}
    assert not unexpected, "\n\n".join(f"{k}\n{m}" for k, m in list(unexpected.items())[:20])
    stale = {_key(k) for k, v in selected.items() if v[0] == "passed"} & set(KNOWN)
    assert not stale, f"listed as failing but passing now (drop them from KNOWN): {stale}"
