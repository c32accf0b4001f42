"""tracekit's Python API (docs/python-api.md): each command as a function returning a typed result that holds
its tables as polars DataFrames and renders itself to any of the CLI's formats (the same documents as the CLI).

``tracekit.analyze``, ``tracekit.kernels``, ``tracekit.doctor``, ``tracekit.walls`` and ``tracekit.diff`` are these
functions, loaded on first use; the floor's is ``tracekit.api.floor`` (``tracekit.floor`` is the floor model's
package). The names load their module when first asked for (``traces``: the trace commands; ``configs``: the
config commands), so a config command never imports the store.
"""

from __future__ import annotations

from typing import Any

_HOMES = {"traces": ("AnalyzeResult", "DiffResult", "DoctorResult", "KernelsResult", "Tables", "analyze", "diff",
                     "doctor", "kernels"),
          "configs": ("FloorReport", "WallsReport", "floor", "named_configs", "walls")}
_HOME = {name: module for module, names in _HOMES.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if _HOME.get(name) == "traces":
        from tracekit.api import traces

        return getattr(traces, name)
    if _HOME.get(name) == "configs":
        from tracekit.api import configs

        return getattr(configs, name)
    raise AttributeError(f"module 'tracekit.api' has no attribute {name!r}")
