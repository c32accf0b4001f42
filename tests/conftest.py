"""Shared test setup: the repository root on sys.path (for ``fixtures``) and the shared traces folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture
def shared_traces() -> Path:
    """``../shared/traces`` beside the checkout; tests that need it skip when it is absent."""
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not beside this checkout")
    return SHARED_TRACES
