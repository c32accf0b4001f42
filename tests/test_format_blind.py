"""The analysis is blind to the trace format: it reads the store's format-neutral tables and views
(``capture``, ``ranges.kind``, ...) and never a reader's metadata keys, the format name or a format's own
range sources. A new reader then needs no analysis change."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ANALYSIS = Path(__file__).resolve().parents[1] / "tracekit" / "analysis"
FORBIDDEN = {
    "raw metadata table": re.compile(r"\btrace_meta\b"),
    "format name column": re.compile(r"\bsource_format\b|\.fmt\s*[=!]="),
    "a format's range source": re.compile(r"\bsource\s*(=|IN|<>)\s*\(?\s*'(nvtx|user_annotation|gpu_user_annotation|"
                                          r"cpu_op|python_function|roctx)'"),
    "a reader's metadata key": re.compile(r"distributedInfo|START_TRIGGER|START_DELAY|EXPORT_HOST|TARGET_INFO_|"
                                          r"deviceProperties|Hostname"),
    "a format test": re.compile(r"""==\s*["'](nsys|kineto|rocpd|xplane)["']"""),
}


def _code(path: Path) -> str:
    """The module without its docstrings and comments (prose may name formats; code may not)."""
    text = re.sub(r'"""[\s\S]*?"""', "", path.read_text(encoding="utf-8"))
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


@pytest.mark.parametrize("path", sorted(ANALYSIS.glob("*.py")), ids=lambda p: p.name)
def test_analysis_module_is_format_blind(path: Path) -> None:
    code = _code(path)
    found = [f"{what}: {m.group(0)!r}" for what, rx in FORBIDDEN.items() for m in rx.finditer(code)]
    assert not found, f"{path.name} reads format-specific data: {found}"


def test_the_check_catches_what_it_names(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("SQL = \"SELECT * FROM trace_meta WHERE source IN ('nvtx', 'x')\"\nif f.fmt == 'nsys': pass\n")
    code = _code(bad)
    assert sum(bool(rx.search(code)) for rx in FORBIDDEN.values()) == 4
