"""CI cannot pass by skipping: it refuses to run without ../shared/traces, and under CI=true the tests that
need the folder fail instead of skipping."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import conftest
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ci_run_fails_without_the_shared_traces(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", checkout / ".ci" / "run")
    run = subprocess.run(["bash", str(checkout / ".ci" / "run")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "../shared/traces is missing" in run.stderr


@pytest.mark.parametrize(("in_ci", "outcome"), [(False, pytest.skip.Exception), (True, pytest.fail.Exception)])
def test_the_shared_traces_fixture_skips_or_fails_under_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           in_ci: bool, outcome: type) -> None:
    monkeypatch.setattr(conftest, "SHARED_TRACES", tmp_path / "absent")
    monkeypatch.setattr(conftest, "IN_CI", in_ci)
    with pytest.raises(outcome, match="shared/traces"):
        conftest.require_shared_traces()
