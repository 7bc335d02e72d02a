"""mpi4py's own collective tests pass with ``COMM`` set to parvox's facade.

``test_cco_buf``, ``test_cco_nb_buf``, ``test_cco_vec`` and ``test_cco_nb_vec`` of the installed
mpi4py's source distribution (downloaded once into ``.cache/``), their ``World`` and
``InplaceWorld`` classes, at 1, 2, 3 and 4 ranks, once per algorithm choice the facade
exposes: ``auto`` and every algorithm name, each set for every operation that offers it (the
test methods of the other operations are left out of that choice's run, they would repeat
``auto``). At 1 rank ``auto`` runs every (array backend, type code) pair of the suite; every
other run takes one pair, rotating with the choice and the rank count, so the buffer kinds
and types meet the algorithms across the runs within the time budget. All choices of a rank
count run in one ``mpiexec``.
"""

from __future__ import annotations

from parvox.collectives.algorithms import ALGORITHMS
from parvox.testing import mpi_test
from tests.collectives import _mpi4py_suite as suite

#: "auto" and every algorithm name, in a fixed order
CHOICES = ("auto", *sorted({a for algs in ALGORITHMS.values() for a in algs}))


# Fetch the suites when pytest collects this module, before any ranks start: the harness runs
# the bodies of every module at one rank count in one launch, so a fixture of this module might
# not have run yet when the first of these bodies does (on the ranks it finds them in place).
suite.ensure_tests()


def _body(index: int, name: str):
    def body() -> None:
        from mpi4py import MPI

        from parvox.collectives import Intracomm

        p = MPI.COMM_WORLD.Get_size()
        if name == "auto":
            algorithm: str | dict[str, str] = "auto"
            operations = None
        else:
            algorithm = {op: name for op, algs in ALGORITHMS.items() if name in algs}
            operations = None if name in ("linear", "native") else sorted(algorithm)
        share = None if (p == 1 and name == "auto") else (7 * index + 13 * p, 1)
        comm = Intracomm(MPI.COMM_WORLD, algorithm=algorithm, progress="test", timeout=120)
        result = suite.run(comm, operations, share)
        assert result.testsRun > 0
        assert result.wasSuccessful(), suite.report(result)

    body.__name__ = body.__qualname__ = f"test_mpi4py_collectives_{name}"
    body.__module__ = __name__
    body.__doc__ = f"mpi4py's collective suites on the facade, algorithm choice {name!r}."
    return body


for _i, _name in enumerate(CHOICES):
    _test = mpi_test(ranks=(1, 2, 3, 4), timeout=400)(_body(_i, _name))
    globals()[_test.__name__] = _test
del _i, _name, _test


def test_operation_of_every_suite_method():
    """Every test method of the four suites maps to a parvox operation (or MPI's own)."""
    import unittest

    from mpi4py import MPI

    with suite._modules(suite.ensure_tests()) as mods:
        known = set(ALGORITHMS) | {"alltoallw"}
        for name in suite.MODULES:
            for cls_name in suite.CLASSES[name]:
                cls = type(cls_name, (getattr(mods[name], cls_name),),
                           {"COMM": MPI.COMM_SELF, "__module__": name})
                for test in unittest.TestLoader().loadTestsFromTestCase(cls):
                    assert suite.operation(test.id()) in known, test.id()
