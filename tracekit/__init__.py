"""Floor-first triage of LLM serving and training traces.

``tracekit.analyze(paths, config=None, **options)``, ``tracekit.kernels``, ``tracekit.doctor``, ``tracekit.walls`` and
``tracekit.diff`` are the Python API (``tracekit.api``, docs/python-api.md), imported on first use so that
``import tracekit`` stays light.
"""

from __future__ import annotations

import sys
from typing import Any

__version__ = "0.1.0"

_API = ("analyze", "kernels", "doctor", "walls", "diff", "api")


def __getattr__(name: str) -> Any:
    """The API functions, loaded when first asked for (PEP 562); the one arrow from the package to its top."""
    if name in _API:
        import tracekit.api  # noqa: F401  # the submodule, by the import system (not through this hook)

        api = sys.modules["tracekit.api"]
        return api if name == "api" else getattr(api, name)
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")
