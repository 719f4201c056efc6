"""The run's last line (tests/conftest.py): passed, failed, skipped, and each distinct skip
reason with its count, so a run that skipped for want of something says so at a glance. Run
for real in an inner pytest session with the project's own conftest."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

pytest_plugins = ["pytester"]


def test_the_last_line_counts_outcomes_and_skip_reasons(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_some="""
import pytest

def test_ok():
    pass

def test_ok_too():
    pass

def test_bad():
    assert 1 == 2

@pytest.mark.parametrize("n", range(3))
def test_no_gpu(n):
    pytest.skip("no NVIDIA GPU (nvidia-smi not found)")

def test_no_root():
    pytest.skip("needs root")
""")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    last = res.outlines[-1]
    assert last == ("tests: 2 passed, 1 failed, 4 skipped | skip reasons: "
                    "3x no NVIDIA GPU (nvidia-smi not found); 1x needs root"), res.outlines[-5:]


def test_an_error_in_a_fixture_is_counted(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_err="""
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("boom")

def test_uses_it(broken):
    pass
""")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert res.outlines[-1] == "tests: 0 passed, 0 failed, 0 skipped, 1 error"
