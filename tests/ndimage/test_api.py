"""The public API of parvox.ndimage mirrors scipy.ndimage (the example runs in tests/test_examples.py)."""

from __future__ import annotations

import inspect

import pytest
import scipy.ndimage as ndi

from parvox import ndimage as pnd

#: parvox's own parameters beyond scipy's: keyword-only, default None (threads per rank)
EXTRA = {"threads"}


@pytest.mark.parametrize("name", [n for n in pnd.__all__ if n != "rescale"])
def test_same_parameters_as_scipy(name: str) -> None:
    ours = inspect.signature(getattr(pnd, name)).parameters
    theirs = inspect.signature(getattr(ndi, name)).parameters
    assert [n for n in ours if n not in EXTRA] == list(theirs)
    for n in EXTRA & set(ours):
        assert ours[n].kind == inspect.Parameter.KEYWORD_ONLY and ours[n].default is None, n
    for p in theirs.values():
        assert ours[p.name].kind == p.kind, p.name
        assert ours[p.name].default == p.default or p.default is inspect.Parameter.empty, p.name
