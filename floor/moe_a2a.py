"""Expert parallelism: the expert GEMM work per GPU (the all-to-all volumes live with the step models that
use them: decode.py for serving, training_work.py for training)."""

from __future__ import annotations


def expert_gemm_flops(expert_rows: float, expert_params: int, etp: int = 1) -> float:
    """Forward FLOPs of the expert MLPs: 2 x rows x params of one expert (sharded over etp)."""
    return 2.0 * expert_rows * expert_params / etp
