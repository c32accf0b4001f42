"""Expert parallelism: the expert GEMM work per GPU, and how many remote nodes a routed token reaches (the
all-to-all volumes live with the step models that use them: decode.py for serving, training_work.py for
training)."""

from __future__ import annotations


def remote_nodes_per_token(top_k: int, nodes: float, n_group: int = 0, topk_group: int = 0) -> float:
    """Expected distinct remote nodes one token's top_k experts sit on, with experts spread evenly over `nodes`.

    Uniform routing: (N - 1)(1 - (1 - 1/N)^k). Group-limited routing (DeepSeek-V3: the experts in n_group
    groups, each token routed within its best topk_group groups) confines a token to S = topk_group x N /
    n_group nodes when groups span whole nodes, S(1 - (1 - 1/S)^k) of them distinct, of which (N - 1)/N are
    remote: at EP64 on 8 nodes, 3.15 instead of 4.59. Never above the uniform figure.
    """
    if nodes <= 1:
        return 0.0
    uniform = (nodes - 1) * (1 - (1 - 1 / nodes) ** top_k)
    if not (n_group and 0 < topk_group < n_group) or nodes < n_group:
        return uniform
    span = topk_group * nodes / n_group
    limited = span * (1 - (1 - 1 / span) ** top_k) * (nodes - 1) / nodes
    return min(uniform, limited)


def expert_gemm_flops(expert_rows: float, expert_params: int, etp: int = 1) -> float:
    """Forward FLOPs of the expert MLPs: 2 x rows x params of one expert (sharded over etp)."""
    return 2.0 * expert_rows * expert_params / etp
