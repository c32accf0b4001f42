"""Shared test setup: the repository root on sys.path (for ``fixtures``) and the shared traces folder.

``shared_traces`` is the one way a test reaches ``../shared/traces``. Without the folder those tests skip,
saying so; under ``CI=true`` (CI always has the folder) they fail instead, so a CI run never passes by
skipping them. Parametrised cases over the folder are listed by name in the tests, not by listing the
folder, so none vanishes when it is absent.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def require_shared_traces() -> Path:
    """``../shared/traces``: skip (fail under CI) when it is not beside this checkout."""
    if not SHARED_TRACES.is_dir():
        message = f"../shared/traces is not beside this checkout ({SHARED_TRACES})"
        if IN_CI:
            pytest.fail(message + "; CI must have it")
        pytest.skip(message)
    return SHARED_TRACES


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """``../shared/traces`` beside the checkout (see the module docstring for when it is absent)."""
    return require_shared_traces()
