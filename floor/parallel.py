"""The 5D training layout DP x TP x CP x PP x EP, its pipeline stages and schedules, checked field by field.

n_gpus = dp x tp x sp x pp, where sp is the context-parallel degree (CP: each rank holds 1/sp of every
sequence). Attention and dense layers run TP-sharded over tp, sequence-split over sp and replicated over dp.
Expert layers reuse the same GPUs as ETP x EP x EDP with ETP = tp, so TP x EP x EDP = TP x DP_attention with
DP_attention = dp x sp: ep must divide dp x sp, and EDP = dp x sp / ep replicas of each expert shard share its
gradients.

Pipeline stages: the first and last stage may hold fewer layers than the others (Megatron-Core
`--decoder-first/last-pipeline-num-layers`; Llama 3 takes one layer off each end to make room for the embedding
and the LM head), the middle stages split the rest evenly. Schedules and their bubbles, in units of one stage's
forward F, full backward B (input and weight gradients) and weight-gradient part W:
- 1f1b (PipeDream-Flush; interleaved with v virtual stages, Narayanan et al. 2021 section 2.2): (pp - 1)(F + B) / v;
- zero_bubble (ZB1P, Qi et al. 2023): (pp - 1)(F + B - 2W);
- dualpipe (DeepSeek-V3 report, Table 2): (pp / 2 - 1)(F&B + B - 3W); each rank holds stages i and pp - 1 - i.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError

SCHEDULES = ("1f1b", "zero_bubble", "dualpipe")


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
    first_layers: int = 0
    last_layers: int = 0
    middle_layers: int = 0
    schedule: str = "1f1b"

    @property
    def cp(self) -> int:
        """Context-parallel degree (the `sp` config field)."""
        return self.sp

    @property
    def dp_attention(self) -> int:
        """Groups that hold distinct tokens of one layer: data x context parallel."""
        return self.dp * self.sp

    @property
    def edp(self) -> int:
        """Expert data parallelism: replicas of each expert shard."""
        return self.dp_attention // self.ep

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp)

    def stage_layers(self) -> list[int]:
        """Transformer layers of each pipeline stage, first to last."""
        if self.pp == 1:
            return [self.first_layers]
        return [self.first_layers] + [self.middle_layers] * (self.pp - 2) + [self.last_layers]


def _split(name: str, n_layers: int, pp: int, v: int, first: int, last: int) -> tuple[int, int, int]:
    """(first, middle, last) layers per stage; 0 for first or last means an even split."""
    if pp == 1:
        return n_layers, n_layers, n_layers
    if not first and not last:
        if n_layers % (pp * v):
            raise ConfigError(f"{name}: pp: pp x pp_interleave = {pp * v} must divide the {n_layers} layers; "
                              "set pp_first_layers and pp_last_layers for uneven end stages")
        each = n_layers // pp
        return each, each, each
    if pp == 2:
        first = first or n_layers - last
        last = last or n_layers - first
        if first + last != n_layers or min(first, last) < 1:
            raise ConfigError(f"{name}: pp_first_layers: with pp=2 the two stages must hold all {n_layers} layers")
        return first, first, last
    rest = n_layers - first - last
    if first < 0 or last < 0 or rest <= 0 or rest % (pp - 2):
        raise ConfigError(f"{name}: pp_first_layers: the {n_layers} layers minus the end stages' ({first} + {last}) "
                          f"must split evenly over the {pp - 2} middle stages; fix pp_first_layers or pp_last_layers")
    middle = rest // (pp - 2)
    if middle % v:
        raise ConfigError(f"{name}: pp_interleave: {v} must divide the {middle} layers of a middle stage")
    first, last = first or middle, last or middle
    if first + last + middle * (pp - 2) != n_layers:
        raise ConfigError(f"{name}: pp_first_layers: give both pp_first_layers and pp_last_layers or neither")
    return first, middle, last


def build_layout(name: str, *, n_gpus: int, dp: int, tp: int, sp: int, pp: int, ep: int, pp_interleave: int,
                 micro_batch: int, global_batch: int, n_layers: int, n_heads: int, n_experts: int,
                 seq_len: int, gpus_per_node: int, first_layers: int = 0, last_layers: int = 0,
                 schedule: str = "1f1b") -> TrainLayout:
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
        ("sp", seq_len % sp == 0, f"sp={sp} must divide context_tokens={seq_len}"),
        ("ep", ep == 1 or n_experts > 0, f"ep={ep} needs an MoE model; set ep=1"),
        ("ep", ep == 1 or (dp * sp) % ep == 0,
         f"ep={ep} must divide dp x sp = {dp * sp} (TP x EP x EDP = TP x DP_attention)"),
        ("ep", ep == 1 or n_experts % ep == 0, f"ep={ep} must divide the {n_experts} experts"),
        ("batch", global_batch % (micro_batch * dp) == 0,
         f"batch={global_batch} must be a multiple of micro_batch x dp = {micro_batch * dp}"),
        ("pipeline_schedule", schedule in SCHEDULES, f"'{schedule}' unknown; use one of: {', '.join(SCHEDULES)}"),
        ("pipeline_schedule", schedule != "dualpipe" or (pp % 2 == 0 and pp_interleave == 1),
         f"dualpipe needs an even pp (got {pp}) and pp_interleave=1"),
    ]
    for field, ok, message in checks:
        if not ok:
            raise ConfigError(f"{name}: {field}: {message}")
    first, middle, last = _split(name, n_layers, pp, pp_interleave, first_layers, last_layers)
    return TrainLayout(n_gpus, dp, tp, sp, pp, ep, pp_interleave, micro_batch, global_batch, first, last, middle,
                       schedule)


def bubble(schedule: str, pp: int, v: int, f: float, b: float, w: float, fb: float) -> float:
    """Pipeline bubble of one step in seconds (module docstring); fb: a forward and a backward overlapped."""
    if pp == 1:
        return 0.0
    if schedule == "zero_bubble":
        return (pp - 1) * max(f + b - 2 * w, 0.0)
    if schedule == "dualpipe":
        return (pp / 2 - 1) * max(fb + b - 3 * w, 0.0)
    return (pp - 1) * (f + b) / v


def in_flight(schedule: str, pp: int, v: int, micro_batches: int, stage: int) -> float:
    """Micro-batches whose activations a stage holds at its peak: pp - stage under 1F1B (x (1 + (pp - 1) /
    (pp v)) on the first stage when interleaved, Korthikanti et al. 2022 section 4.2.3); DualPipe pp + 1 on every
    rank (DeepSeek-V3 Table 2), spread over its two stages."""
    if schedule == "dualpipe":
        return min(pp + 1, micro_batches) / 2
    held = min(pp - stage, micro_batches)
    if v > 1:
        held *= 1 + (pp - 1) / (pp * v)
    return held
