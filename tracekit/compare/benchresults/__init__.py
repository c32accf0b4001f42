"""Readers of serving-benchmark result files (vLLM, SGLang, GenAI-Perf, AIPerf, GuideLLM), one module per tool,
all normalised into ``BenchResult``. ``read_results`` recognises the format from the content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracekit.errors import InputError

from . import aiperf, genai_perf, guidellm, sglang, vllm
from .record import CLOSED_LOOP, BenchResult

__all__ = ["CLOSED_LOOP", "BenchResult", "read_result_file", "read_results"]

MAX_BYTES = 256 * 1024 * 1024  # result files are small; anything larger is not one
_SINGLE = (vllm, sglang, aiperf, genai_perf)  # one JSON object -> one run (AIPerf before its GenAI-Perf look-alike)


def read_results(paths: list[Path]) -> list[BenchResult]:
    """Every run in every file, in the order given."""
    return [r for p in paths for r in read_result_file(p)]


def read_result_file(path: Path) -> list[BenchResult]:
    """One result file (JSON, or JSONL with one run per line) -> its runs; unknown content is an InputError."""
    if not path.is_file():
        raise InputError(f"{path}: no such file; give a benchmark result file (JSON or JSONL)")
    if path.stat().st_size > MAX_BYTES:
        raise InputError(f"{path}: larger than {MAX_BYTES >> 20} MiB; not a benchmark result file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot be read as UTF-8 text ({type(exc).__name__})") from None
    docs = _documents(text, path)
    if len(docs) == 1 and guidellm.matches(docs[0]):
        return guidellm.read_report(docs[0], str(path))
    out = []
    for index, doc in enumerate(docs):
        reader = next((m for m in _SINGLE if m.matches(doc)), None)
        if reader is None:
            raise InputError(f"{path}: {'line ' + str(index + 1) + ' ' if len(docs) > 1 else ''}is not a result "
                             "of vLLM bench serve, SGLang bench_serving, GenAI-Perf, AIPerf or GuideLLM; "
                             "see docs/reconcile.md")
        out.append(reader.read(doc, str(path), index))
    return out


def _documents(text: str, path: Path) -> list[Any]:
    """The file as one JSON document, else as JSON lines (SGLang, vLLM --append-result)."""
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        pass
    docs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            docs.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {number} is not JSON ({exc.msg}); "
                             "give a benchmark result file (JSON or JSONL)") from None
    if not docs:
        raise InputError(f"{path}: empty; give a benchmark result file (JSON or JSONL)")
    return docs
