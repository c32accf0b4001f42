"""floor/ can be handed over alone: copied without the rest of tracekit, it runs on the standard library."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, runpy, sys
before = set(sys.modules)  # what the interpreter's own start-up loaded (site hooks)
sys.argv = ["floor", "floor", "--config", "configs/dsv32-ep16.toml", "--json"]
try:
    runpy.run_module("floor", run_name="__main__")
except SystemExit as exc:
    assert not exc.code, exc.code
top = {m.split(".")[0] for m in set(sys.modules) - before}
print(json.dumps(sorted(top - set(sys.stdlib_module_names) - {"floor"})), file=sys.stderr)
"""


def test_floor_runs_alone_on_the_standard_library(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "floor", tmp_path / "floor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "budgets" / "configs", tmp_path / "configs")  # data only: a folder of TOML files
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []  # nothing beyond the standard library
    result = json.loads(done.stdout)
    assert result["t_opt_ns"] > 0 and result["config"]["name"] == "dsv32-ep16"
