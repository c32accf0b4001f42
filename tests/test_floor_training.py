"""Training-step model: configs, 5D layout errors, pipeline stages and schedules, memory per tensor, overlap,
and the predict CLI. Validation against published measurements is tests/test_validation.py."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tracekit.budgets.configs import list_configs, load_config
from tracekit.cli import main
from tracekit.floor import CLASS_NAMES, ConfigError, compute_floor
from tracekit.floor.parallel import bubble, in_flight
from tracekit.floor.training import predict_training
from tracekit.floor.training_config import train_layout
from tracekit.floor.training_memory import stage_params
from tracekit.floor.training_work import route_copies, stages

TRAINING = ["gpt2-small-dp8-a100", "gpt2-medium-dp8-a100", "gpt2-medium-dp8-a100-noflash",
            "gpt3-175b-megatron-a100", "mixtral-8x7b-ep8-h100", "megatron-gpt-145b-a100", "llama3-405b-8k-8192gpu-h100",
            "llama3-405b-128k-h100", "dsv3-train-h800", "dsv2-train-h800"]


def step(name: str, **sets) -> int:
    return predict_training(load_config(name, {k: str(v) for k, v in sets.items()})).step_ns


@pytest.mark.parametrize("name", TRAINING)
def test_training_configs_give_feasible_steps_with_known_parts(name):
    pred = predict_training(load_config(name))
    assert pred.memory.feasible, pred.memory.to_dict()
    assert pred.step_ns > 0 and 0 < pred.mfu < 1
    floor = compute_floor(load_config(name))
    assert {p.name for p in floor.parts} <= set(CLASS_NAMES)
    names = {p.name for p in floor.parts}
    assert {"attn_proj", "attn_core", "norm_elementwise", "optimizer"} <= names
    lay = pred.layout  # the floor describes the critical rank: the LM head is there only if that rank holds it
    holds_head = pred.critical_stage == lay.pp - 1 or (lay.schedule == "dualpipe" and pred.critical_stage == 0)
    assert ("lm_head" in names) == holds_head
    # the floor (physical peaks) is under the calibrated step; expected_ns is that step's max over resources
    assert floor.peak_kind == "physical" and floor.expected_peak_kind == "achievable"
    assert floor.t_opt_ns <= floor.expected_ns <= pred.step_ns


def test_layout_parts_follow_the_parallelism():
    mix = {p.name for p in compute_floor(load_config("mixtral-8x7b-ep8-h100")).parts}
    assert {"moe_experts", "a2a_dispatch", "a2a_combine", "reducescatter", "allgather"} <= mix
    gpt3 = predict_training(load_config("gpt3-175b-megatron-a100"))
    assert gpt3.layout.micro_batches == 1536 // 8 and gpt3.bubble_ns > 0
    assert {"allreduce", "sendrecv"} <= {p.name for p in gpt3.parts}


def test_recompute_and_overlap_move_the_step():
    base = step("gpt2-small-dp8-a100")
    assert step("gpt2-small-dp8-a100", recompute="full") > base * 1.2
    no_overlap = predict_training(load_config("gpt2-small-dp8-a100", {"grad_overlap": "false"}))
    assert no_overlap.grad_exposed_ns == no_overlap.grad_comm_ns > 0
    assert predict_training(load_config("gpt2-small-dp8-a100")).grad_exposed_ns == 0


def test_memory_counts_weights_grads_and_adam_states():
    pred = predict_training(load_config("gpt2-small-dp8-a100"))
    mem, params = pred.memory, load_config("gpt2-small-dp8-a100").model.params_total()
    assert mem.weights == pytest.approx(2 * params) and mem.grads == pytest.approx(4 * params)
    assert mem.optimizer == pytest.approx(12 * params)
    big = predict_training(load_config("gpt2-medium-dp8-a100-noflash", {"micro_batch": "64"}))
    assert not big.memory.feasible  # 64 sequences of 1k with score matrices exceed 80 GB


@pytest.mark.parametrize(("sets", "field"), [
    ({"tp": "3"}, "dp"), ({"dp": "0", "tp": "5", "n_gpus": "10"}, "tp"), ({"ep": "2"}, "ep"),
    ({"batch": "100"}, "batch"), ({"recompute": "some"}, "recompute"), ({"attention_kernel": "fa9"},
                                                                          "attention_kernel"),
    ({"pp": "5", "dp": "0", "n_gpus": "10"}, "pp"),
])
def test_bad_layouts_name_the_field(sets, field):
    with pytest.raises(ConfigError, match=rf": {field}: |^--set {field}="):  # the field, or the option that set it
        load_config("gpt2-small-dp8-a100", sets)


def test_expert_parallel_must_divide_data_parallel():
    with pytest.raises(ConfigError, match="TP x EP x EDP"):
        load_config("mixtral-8x7b-ep8-h100", {"n_gpus": "4", "dp": "4"})



def test_decode_config_settings_are_unchanged():
    assert "micro_batch" not in load_config("llama3-70b-tp8-h100").settings()
    assert load_config("gpt2-small-dp8-a100").settings()["micro_batch"] == 64


def test_predict_cli_training_and_inference():
    out = CliRunner().invoke(main, ["predict", "--config", "gpt2-small-dp8-a100", "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["layout"]["dp"] == 8 and doc["memory"]["feasible"] and doc["step_ns"] > 0
    out = CliRunner().invoke(main, ["predict", "--config", "llama3-70b-tp8-h100", "--format", "json"])
    assert out.exit_code == 0 and json.loads(out.stdout)["t_opt_ns"] > 0
    bad = CliRunner().invoke(main, ["predict", "--config", "gpt2-small-dp8-a100", "--set", "sp=3"])
    assert bad.exit_code == 2 and "sp" in bad.stderr


# ---- pipeline stages and schedules ------------------------------------------------------------------------------

def test_uneven_end_stages_follow_the_config():
    """Llama 3: one layer fewer on the first and last stage (126 = 7 + 14 x 8 + 7)."""
    lay = predict_training(load_config("llama3-405b-8k-8192gpu-h100")).layout
    assert lay.stage_layers() == [7] + [8] * 14 + [7] and sum(lay.stage_layers()) == 126


@pytest.mark.parametrize(("sets", "field"), [
    ({"pp_first_layers": "6", "pp_last_layers": "7"}, "pp_first_layers"),  # 113 layers over 14 middle stages
    ({"pp_first_layers": "0", "pp_last_layers": "0"}, "pp"),  # 126 layers do not split evenly over 16 x 8
    ({"pipeline_schedule": "gpipe"}, "pipeline_schedule"),
    ({"comm_overlap": "pp,dp"}, "comm_overlap"),
    ({"zero": "4"}, "zero"),
    ({"sequence_parallel": "true", "tp": "1", "dp": "0"}, "sequence_parallel"),
])
def test_bad_training_fields_name_the_field(sets, field):
    with pytest.raises(ConfigError, match=rf": {field}: |^--set {field}="):  # the field, or the option that set it
        load_config("llama3-405b-8k-8192gpu-h100", sets)


def test_bubbles_follow_each_schedule():
    f, b, w = 1.0, 2.0, 1.0
    assert bubble("1f1b", 16, 1, f, b, w, f + b) == pytest.approx(15 * 3)
    assert bubble("1f1b", 16, 8, f, b, w, f + b) == pytest.approx(15 * 3 / 8)
    assert bubble("zero_bubble", 16, 1, f, b, w, f + b) == pytest.approx(15 * (1 + 2 - 2))
    assert bubble("dualpipe", 16, 1, f, b, w, f + b) == pytest.approx(7 * (3 + 2 - 3))  # DeepSeek-V3 Table 2
    assert in_flight("1f1b", 16, 1, 64, 0) == 16 and in_flight("1f1b", 16, 1, 64, 15) == 1
    assert in_flight("1f1b", 16, 8, 64, 0) == pytest.approx(16 * (1 + 15 / 128))
    assert in_flight("dualpipe", 16, 1, 120, 3) == pytest.approx(17 / 2)  # PP + 1 over a rank's two stages


def test_more_micro_batches_shrink_the_bubble_share():
    big = predict_training(load_config("llama3-405b-8k-8192gpu-h100"))  # 32 micro-batches per pipeline
    small = predict_training(load_config("llama3-405b-8k-16384gpu-h100"))  # 16
    assert big.bubble_ns == small.bubble_ns
    assert big.bubble_ns / big.step_ns < small.bubble_ns / small.step_ns


# ---- memory -----------------------------------------------------------------------------------------------------

def _mem(name: str, **sets):
    return predict_training(load_config(name, {k: str(v) for k, v in sets.items()})).memory


def test_sequence_parallel_shards_the_norm_region_over_tp():
    items = dict(_mem("llama3-405b-8k-8192gpu-h100").items)
    plain = dict(_mem("llama3-405b-8k-8192gpu-h100", sequence_parallel=False).items)
    key = "activations: norms and GEMM inputs"
    assert plain[key] == pytest.approx(8 * items[key])  # tp = 8
    assert plain["activations: mlp intermediates"] == items["activations: mlp intermediates"]


def test_recompute_orders_activation_memory():
    acts = [_mem("llama3-405b-8k-8192gpu-h100", recompute=r).activations for r in ("none", "selective", "full")]
    assert acts[0] > acts[1] > acts[2] > 0
    full = _mem("llama3-405b-8k-8192gpu-h100", recompute="full")
    assert dict(full.items) == pytest.approx({**{k: v for k, v in full.items if not k.startswith("activations")},
                                               "activations: layer inputs": full.activations})


def test_zero_stages_shard_optimizer_then_gradients_then_weights():
    m = {z: _mem("llama3-405b-8k-8192gpu-h100", zero=z) for z in (0, 1, 2, 3)}
    assert m[1].optimizer == pytest.approx(m[0].optimizer / 64) and m[1].grads == m[0].grads
    assert m[2].grads == pytest.approx(m[1].grads / 64) and m[2].weights == m[1].weights
    assert m[3].weights < m[2].weights / 3  # sharded, plus two layers gathered at a time


def test_context_parallel_splits_activations_and_exchanges_kv():
    base = predict_training(load_config("llama3-405b-128k-h100"))
    half = predict_training(load_config("llama3-405b-128k-h100", {"sp": "8", "dp": "16", "batch": "256"}))
    assert base.memory.activations == pytest.approx(half.memory.activations / 2, rel=0.01)
    gathers = {p.name: p.messages for p in base.parts}
    assert gathers["allgather"] > 0 and gathers["reducescatter"] > 0


def test_a_layout_that_does_not_fit_names_the_tensor_and_the_overflow():
    mem = _mem("llama3-405b-8k-8192gpu-h100", micro_batch=2)
    assert not mem.feasible
    over = (mem.total - mem.capacity) / 1e9
    assert f"{over:.1f} GB over" in mem.verdict() and "activations: mlp intermediates" in mem.verdict()
    assert mem.largest[0] == "activations: mlp intermediates"


def test_first_stage_holds_the_embedding_and_the_last_the_head():
    cfg = load_config("llama3-405b-8k-8192gpu-h100")
    sts = stages(cfg, train_layout(cfg))
    first, middle, last = (stage_params(cfg, st)[0] for st in (sts[0], sts[1], sts[-1]))
    emb = cfg.model.embedding_params / 8
    assert first == pytest.approx(middle * 7 / 8 + emb) and last == pytest.approx(first)


# ---- MoE, FP8, overlap ------------------------------------------------------------------------------------------

def test_node_limited_routing_caps_the_copies_per_token():
    assert route_copies(8, 8, 0) == 8  # one copy per routed expert
    assert route_copies(8, 8, 4) == 4  # DeepSeek-V3: at most 4 nodes, one copy each
    assert route_copies(6, 8, 3) == 3  # DeepSeek-V2: at most 3 devices
    assert route_copies(2, 64, 4) == pytest.approx(64 * (1 - (63 / 64) ** 2))


def test_fp8_gemms_and_hidden_all_to_alls_speed_up_deepseek_v3():
    base = step("dsv3-train-h800")
    assert step("dsv3-train-h800", weight_dtype="bf16") > base * 1.1
    assert step("dsv3-train-h800", comm_overlap="pp") > base * 1.1  # all-to-alls on the critical path


def test_tp_overlap_hides_tensor_parallel_collectives():
    exposed = predict_training(load_config("llama3-405b-8k-8192gpu-h100"))
    hidden = predict_training(load_config("llama3-405b-8k-8192gpu-h100", {"comm_overlap": "pp,tp"}))
    assert hidden.step_ns < exposed.step_ns
    assert {p.name: p.exposed_ns for p in hidden.parts}["allgather"] < \
        {p.name: p.exposed_ns for p in exposed.parts}["allgather"]


def test_the_floor_is_below_the_estimate_on_physical_peaks():
    from dataclasses import replace

    for name in ("llama3-405b-8k-8192gpu-h100", "dsv3-train-h800", "megatron-gpt-1t-a100"):
        cfg = load_config(name)
        floor = compute_floor(replace(cfg, peaks="physical"))
        assert floor.peak_kind == "physical" and 0 < floor.t_opt_ns < predict_training(cfg).step_ns


def test_predict_reports_estimate_and_floor_for_training_and_inference():
    for name in ("llama3-405b-8k-8192gpu-h100", "llama3-70b-tp8-h100"):
        out = CliRunner().invoke(main, ["predict", "--config", name, "--format", "json"])
        assert out.exit_code == 0, out.output
        doc = json.loads(out.stdout)
        assert doc["peak_kind"] == "physical" and doc["estimate_peak_kind"] == "achievable"
        assert 0 < doc["floor_t_opt_ns"] <= doc["estimate_ns"]
        assert doc["estimate_over_floor"] == pytest.approx(doc["estimate_ns"] / doc["floor_t_opt_ns"], rel=1e-3)
    text = CliRunner().invoke(main, ["predict", "--config", "llama3-405b-8k-8192gpu-h100"]).output
    assert "not a bound" in text and "floor_t_opt_ns" in text and "fits:" in text


@pytest.mark.parametrize("name", [n for n in list_configs() if load_config(n).phase == "training"])
def test_every_training_config_runs_through_predict_and_floor(name):
    for command in ("predict", "floor"):
        out = CliRunner().invoke(main, [command, "--config", name, "--format", "json"])
        assert out.exit_code == 0, (command, out.output)
    doc = json.loads(CliRunner().invoke(main, ["predict", "--config", name, "--format", "json"]).stdout)
    assert doc["floor_t_opt_ns"] <= doc["estimate_ns"] and doc["memory"]["verdict"]
