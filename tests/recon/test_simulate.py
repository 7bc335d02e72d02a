"""List-mode data: the file format, the simulation's input checks, the sensitivity image
against a Monte Carlo of the simulation (parallel runs: test_parallel.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from parvox.recon import (
    MU_WATER,
    ImageGrid,
    ListModeFile,
    Scanner,
    cached_sensitivity,
    make_phantom,
    read_header,
    sensitivity,
    simulate,
    write_events,
)

SCANNER = Scanner(24.0, 30, 5, 3.0)  # 435 crystal pairs x 25 ring pairs
GRID = ImageGrid((5, 13, 11), (3.0, 2.5, 2.5))


def test_sensitivity_is_the_detected_fraction_of_a_simulation(tmp_path):
    # the geometric factors of the system matrix against a Monte Carlo of isotropic decays:
    # sum_j f_j a_j / sum_j f_j is the probability that a decay of f is recorded
    s = Scanner.preset("tiny")
    g = ImageGrid((8, 16, 16), (3.0, 2.5, 2.5))
    z, y, x = g.mesh()
    act = ((x**2 + y**2 <= 18.0**2) & (np.abs(z) <= 10.0)) * np.ones(g.shape)
    mu = np.where(act > 0, 0.0096, 0.0).astype(np.float32)
    for m in (None, mu):
        a = sensitivity(s, g, method="joseph", mu=m)
        predicted = float((act * a).sum() / act.sum())
        r = simulate(act, g, s, tmp_path / "x.lm", counts=300_000, seed=1, mu=m)
        measured = r.trues / r.decays
        assert predicted == pytest.approx(measured, rel=0.02)
    assert predicted < 0.9 * float((act * sensitivity(s, g)).sum() / act.sum())  # attenuation


def test_sensitivity_is_cached_beside_the_data(tmp_path):
    a, path, hit = cached_sensitivity(tmp_path, SCANNER, GRID)
    assert not hit and os.path.dirname(path) == str(tmp_path) and os.path.isfile(path)
    np.testing.assert_array_equal(a, sensitivity(SCANNER, GRID))
    again, path_again, hit = cached_sensitivity(tmp_path, SCANNER, GRID)
    assert hit and path_again == path
    np.testing.assert_array_equal(again, a)
    # another projector or attenuation map is another image, cached under another name
    mu = np.full(GRID.shape, MU_WATER, np.float32)
    for kw in ({"method": "siddon"}, {"mu": mu}):
        b, other, hit = cached_sensitivity(tmp_path, SCANNER, GRID, **kw)
        assert not hit and other != path
        np.testing.assert_array_equal(b, sensitivity(SCANNER, GRID, **kw))
    # a file that does not fit the grid is recomputed and replaced
    np.save(path, np.zeros((2, 2, 2)))
    fixed, _, hit = cached_sensitivity(tmp_path, SCANNER, GRID)
    assert not hit
    np.testing.assert_array_equal(fixed, a)
    assert np.load(path).shape == GRID.shape
    names = os.listdir(tmp_path)  # three images, no temporary file left behind
    assert len(names) == 3 and all(n.startswith("sensitivity-") and n.endswith(".npy")
                                   for n in names)


def test_list_mode_files_are_checked(tmp_path):
    path = tmp_path / "e.lm"
    write_events(path, [1, 2], [3, 4], n_detectors=8)
    assert read_header(path)["n_events"] == 2
    raw = path.read_bytes()
    (tmp_path / "short.lm").write_bytes(raw[:-3])
    with pytest.raises(ValueError, match="truncated"):
        read_header(tmp_path / "short.lm")
    (tmp_path / "bad.lm").write_bytes(b"NOTPARVOX" + raw[9:])
    with pytest.raises(ValueError, match="magic"):
        read_header(tmp_path / "bad.lm")
    with pytest.raises(ValueError, match=r"no\.lm"):
        read_header(tmp_path / "no.lm")
    with pytest.raises(ValueError, match="detector"):
        write_events(path, [9], [1], n_detectors=8)
    with ListModeFile(path) as f, pytest.raises(ValueError, match="outside"):
        f.read(1, 2)


def test_simulate_rejects_bad_input(tmp_path):
    p = make_phantom("iec", GRID)
    with pytest.raises(ValueError, match="counts"):
        simulate(p.activity, GRID, SCANNER, tmp_path / "x.lm", counts=0)
    with pytest.raises(ValueError, match="randoms_fraction"):
        simulate(p.activity, GRID, SCANNER, tmp_path / "x.lm", counts=10, randoms_fraction=1.0)
    with pytest.raises(ValueError, match="activity"):
        simulate(p.activity[:2], GRID, SCANNER, tmp_path / "x.lm", counts=10)
    with pytest.raises(ValueError, match="mu"):
        simulate(p.activity, GRID, SCANNER, tmp_path / "x.lm", counts=10, mu=p.mu[:, :2])
