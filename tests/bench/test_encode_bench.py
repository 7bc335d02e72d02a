"""bench/encode.py: both slices encoded and checked, and the ratio line printed."""

import pytest


@pytest.fixture(scope="module")
def bench(bench_script):
    return bench_script("encode")


def test_the_noisy_slice_is_stored_and_the_smooth_one_compressed(bench, capsys):
    images = bench.slices(64)
    assert images["smooth"].shape == (64, 64, 3)
    smooth, noisy = (bench.measure(images[k], 1) for k in ("smooth", "noisy"))
    assert smooth["parvox_kb"] < 0.5 * images["smooth"].nbytes / 1e3  # compressed
    assert noisy["parvox_kb"] > images["noisy"].nbytes / 1e3  # stored, with its framing
    bench.main(["--size", "64", "--repeats", "1"])
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("ratio: parvox/pillow png noisy = ")
    assert [line.split()[0] for line in out[2:4]] == ["smooth", "noisy"]


def test_bad_arguments_exit_naming_them(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--size", "1"])
    assert "--size" in capsys.readouterr().err
