"""The suite's own scheduling (tests/conftest.py): under `make test`'s `--dist loadgroup`
the embedded model's tests share one xdist worker. pytest-xdist reads the groups from
node ids, and a pytest release that changes how node ids are kept makes it drop them
without a word (pytest 9.2 with pytest-xdist 3.8): this catches that."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = """
import os
from pathlib import Path

import pytest


def note(name):
    Path(os.environ["PI_SCHEDULING_LOG"], name).write_text(os.environ["PYTEST_XDIST_WORKER"])


@pytest.mark.embedded_model
@pytest.mark.parametrize("n", range(4))
def test_grouped(n):
    note(f"grouped-{n}")


@pytest.mark.parametrize("n", range(4))
def test_free(n):
    note(f"free-{n}")
"""


def test_tests_marked_embedded_model_run_on_one_xdist_worker(tmp_path: Path) -> None:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_grouping.py").write_text(TESTS, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    slow: long\n    embedded_model: the embedded model\n",
        encoding="utf-8",
    )
    log = tmp_path / "log"
    log.mkdir()
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
         "-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"), str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PI_SCHEDULING_LOG": str(log)},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr

    grouped = {(log / f"grouped-{n}").read_text() for n in range(4)}
    free = {(log / f"free-{n}").read_text() for n in range(4)}
    assert len(grouped) == 1, grouped  # one worker ran all four
    assert free <= {"gw0", "gw1"} and len(free | grouped) == 2  # both workers were used
