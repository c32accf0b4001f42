"""The floor is a lower bound: at every published measurement's own operating point (bench/lower_bounds.py,
docs/lower-bounds.md), t_opt, or the class budget for a class or kernel row, is not above what was measured."""

from __future__ import annotations

import pytest

from bench.lower_bounds import MEASUREMENTS, document, rows


@pytest.mark.parametrize("m", MEASUREMENTS, ids=[m.key for m in MEASUREMENTS])
def test_floor_is_not_above_the_measurement(m) -> None:
    bound = m.floor()
    assert 0 < bound.t_opt_ns <= bound.t_sum_ns + 1
    assert bound.t_opt_ns <= m.measured_ns, f"{m.key}: t_opt {bound.t_opt_ns:.0f} ns > measured {m.measured_ns:.0f} ns"


def test_the_table_covers_what_the_issue_asks() -> None:
    keys = {m.key for m in MEASUREMENTS}
    assert len(MEASUREMENTS) >= 10
    assert {"dsv3-h800-decode", "llama70b-h100-tp2", "ant-h20-decode", "flashmla-dense", "deepgemm-m64",
            "nccl-h200-allreduce", "deepep-dispatch-ep16",
            # issue 25: the three measurements that beat the floor before NVLS on H800, the NVL72 domain with
            # NVFP4, and node-limited routing
            "nccl-h800-nvls", "sglang-gb200-decode", "deepep-normal-dispatch-ep64"} <= keys
    assert all(m.source and m.measured_ns > 0 for m in MEASUREMENTS)


def test_checked_in_doc_is_what_the_script_writes() -> None:
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "lower-bounds.md"
    assert doc.read_text(encoding="utf-8") == document(rows())


def test_case_study_in_floor_md_is_what_the_script_writes() -> None:
    """docs/floor.md's case-study block is bench/case_study.py's output, and its numbers hold what it says."""
    from pathlib import Path

    from bench.case_study import BEGIN, END, block, sides

    text = (Path(__file__).resolve().parents[1] / "docs" / "floor.md").read_text(encoding="utf-8")
    assert text[text.index(BEGIN):text.index(END) + len(END)] == block()
    tp, ep = sides()
    assert tp.cfg.kv_capacity_requests < ep.cfg.kv_capacity_requests  # replicated latent under TP
    assert tp.at_one.t_opt_ns < ep.at_one.t_opt_ns  # at batch 1, TP16 is faster
