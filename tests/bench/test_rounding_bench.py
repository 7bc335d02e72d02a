"""bench/rounding.py: both messages of a small phantom timed and checked, the ratio printed."""

import pytest


@pytest.fixture(scope="module")
def bench(bench_script):
    return bench_script("rounding")


def test_both_messages_are_timed_and_the_ratio_line_printed(bench, capsys, tmp_path):
    bench.main(["--shape", "24", "28", "32", "--nplanes", "2", "--repeats", "1",
                "--workdir", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith("float32 ") and "rounded to uint8" in out[-2]
    assert out[-1].startswith("ratio: rounded/float32 message = ")
    assert float(out[-1].split("= ")[1]) > 0


@pytest.mark.parametrize("argv, name", [(["--nplanes", "0"], "--nplanes"),
                                        (["--repeats", "-1"], "--repeats"),
                                        (["--shape", "1", "8", "8"], "--shape")])
def test_bad_arguments_exit_naming_them(bench, capsys, argv, name):
    with pytest.raises(SystemExit):
        bench.main(argv)
    assert name in capsys.readouterr().err
