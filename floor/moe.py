"""Expected number of distinct experts a step touches: the MoE weight traffic is neither all nor top-k."""

from __future__ import annotations


def expected_distinct_experts(
    n_experts: int, top_k: int, tokens: float, local_experts: float | None = None
) -> float:
    """Expected distinct experts touched among `local_experts` of `n_experts` by `tokens` tokens.

    Each token picks top_k distinct experts; under uniform routing a given expert is missed by one token
    with probability 1 - k/E, so by T independent tokens with (1 - k/E)^T. Expected touched among the
    E_local experts a GPU holds is E_local * (1 - (1 - k/E)^T). One token touches k experts; T -> inf
    touches all of them.
    """
    if n_experts <= 0 or top_k <= 0 or tokens <= 0:
        return 0.0
    local = n_experts if local_experts is None else local_experts
    miss = (1.0 - top_k / n_experts) ** tokens
    return local * (1.0 - miss)
