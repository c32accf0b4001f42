"""The 5D training layout DP x TP x SP x PP x EP, checked field by field.

n_gpus = dp x tp x sp x pp. Attention and dense layers run TP-sharded over tp, sequence-split over sp and
replicated over dp. Expert layers reuse the same GPUs as ETP x EP x EDP with ETP = tp, so
TP x EP x EDP = TP x DP_attention with DP_attention = dp x sp: ep must divide dp x sp, and EDP = dp x sp / ep
replicas of each expert shard share its gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class TrainLayout:
    """Degrees of one training layout; `micro_batches` per optimizer step per pipeline."""

    n_gpus: int
    dp: int
    tp: int
    sp: int
    pp: int
    ep: int
    pp_interleave: int
    micro_batch: int
    global_batch: int

    @property
    def dp_attention(self) -> int:
        """Groups that hold distinct tokens of one layer: data x sequence parallel."""
        return self.dp * self.sp

    @property
    def edp(self) -> int:
        """Expert data parallelism: replicas of each expert shard."""
        return self.dp_attention // self.ep

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp)


def build_layout(name: str, *, n_gpus: int, dp: int, tp: int, sp: int, pp: int, ep: int, pp_interleave: int,
                 micro_batch: int, global_batch: int, n_layers: int, n_heads: int, n_experts: int,
                 seq_len: int, gpus_per_node: int) -> TrainLayout:
    """Derive dp when 0 and validate; a ConfigError names the offending field and what to do."""
    for field, value in (("tp", tp), ("sp", sp), ("pp", pp), ("ep", ep), ("pp_interleave", pp_interleave),
                         ("micro_batch", micro_batch), ("batch", global_batch)):
        if value < 1:
            raise ConfigError(f"{name}: {field} must be >= 1, got {value}; fix {field}")
    model_par = tp * sp * pp
    if dp == 0:
        if n_gpus % model_par:
            raise ConfigError(f"{name}: n_gpus ({n_gpus}) is not a multiple of tp x sp x pp ({model_par}); "
                              "fix n_gpus, tp, sp or pp")
        dp = n_gpus // model_par
    checks = [
        ("dp", dp >= 1 and dp * model_par == n_gpus,
         f"dp x tp x sp x pp = {dp}x{tp}x{sp}x{pp} must equal n_gpus={n_gpus}; set dp=0 to derive it"),
        ("tp", n_heads % tp == 0, f"tp={tp} must divide the {n_heads} attention heads"),
        ("tp", tp <= gpus_per_node, f"tp={tp} spans nodes of {gpus_per_node} GPUs; keep tp inside a node"),
        ("pp", n_layers % (pp * pp_interleave) == 0,
         f"pp x pp_interleave = {pp * pp_interleave} must divide the {n_layers} layers"),
        ("sp", seq_len % sp == 0, f"sp={sp} must divide context_tokens={seq_len}"),
        ("ep", ep == 1 or n_experts > 0, f"ep={ep} needs an MoE model; set ep=1"),
        ("ep", ep == 1 or (dp * sp) % ep == 0,
         f"ep={ep} must divide dp x sp = {dp * sp} (TP x EP x EDP = TP x DP_attention)"),
        ("ep", ep == 1 or n_experts % ep == 0, f"ep={ep} must divide the {n_experts} experts"),
        ("batch", global_batch % (micro_batch * dp) == 0,
         f"batch={global_batch} must be a multiple of micro_batch x dp = {micro_batch * dp}"),
    ]
    for field, ok, message in checks:
        if not ok:
            raise ConfigError(f"{name}: {field}: {message}")
    return TrainLayout(n_gpus, dp, tp, sp, pp, ep, pp_interleave, micro_batch, global_batch)
