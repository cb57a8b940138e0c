"""``make test`` runs the suite with ``--dist loadgroup``: the tests that share a costly module
fixture carry one ``xdist_group`` and must run on one worker, or each worker builds the fixture
(a Slurm cluster, a trained agent) again. pytest-xdist 3.8 under pytest 9.2 drops the groups
without a word (pytest-xdist#1386); ``conftest.py`` puts them back."""

import subprocess
import sys

from helpers import REPO

GROUPED = """
import pytest

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    pass

@pytest.mark.parametrize("i", range(6))
def test_free(i):
    pass
"""


def test_the_tests_of_a_group_run_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    # the suite's conftest as a plugin, on a module of its own: 6 grouped and 6 free tests
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "-v", "-c", "/dev/null", "--rootdir", str(tmp_path),
         str(tmp_path / "test_grouped.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={"PYTHONPATH": str(REPO / "tests"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    grouped = [line.split()[0] for line in run.stdout.splitlines() if "test_grouped[" in line
               and "@shared" in line and "PASSED" in line]  # fmt: skip
    assert len(grouped) == 6, run.stdout[-2000:]
    assert len(set(grouped)) == 1, f"the group ran on {sorted(set(grouped))}"
