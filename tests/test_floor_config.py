"""Config loading, `extends`, `--set` overrides and one-line ConfigErrors."""

from __future__ import annotations

import pytest

from tracekit.budgets.configs import list_configs, load_config
from tracekit.floor import ConfigError
from tracekit.floor.units import format_ns, parse_duration_ns

REQUIRED = {"dsv32-ep16", "dsv32-tp16", "llama3-70b-tp8-h100", "qwen3-8b-tp1-mi300x", "qwen3-235b-ep8-h200"}


def test_named_configs_listed_and_load():
    names = list_configs()
    assert set(names) >= REQUIRED
    for n in names:
        cfg = load_config(n)
        assert cfg.name == n and cfg.batch >= 1 and cfg.description


def test_dsv32_layouts():
    ep, tp = load_config("dsv32-ep16"), load_config("dsv32-tp16")
    assert (ep.model.key, ep.hardware.key, ep.n_gpus, ep.tp, ep.dp_attention, ep.ep) == (
        "deepseek-v3.2",
        "h20",
        16,
        16,
        16,
        16,
    )
    assert (tp.n_gpus, tp.tp, tp.dp_attention, tp.ep) == (16, 16, 1, 1)
    assert ep.layout.requests_per_gpu(128) == 8  # DP-attention: batch / DP
    assert tp.layout.requests_per_gpu(128) == 128  # TP: every rank sees every request


def test_overrides_cast_and_apply():
    cfg = load_config(
        "dsv32-ep16",
        {
            "batch": "64",
            "kv_format": "bf16",
            "reserve_per_gpu_bytes": "4GB",
            "weight_dtype": "fp8",
            "context_tokens": "2e3",
        },
    )
    assert (cfg.batch, cfg.kv_format, cfg.reserve_per_gpu_bytes, cfg.context_tokens) == (
        64,
        "bf16",
        4_000_000_000,
        2000,
    )


def test_user_toml_extends_named(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('extends = "dsv32-ep16"\nbatch = 32\nhardware = "h200"\n')
    cfg = load_config(str(path))
    assert (cfg.name, cfg.batch, cfg.hardware.key, cfg.ep) == ("mine", 32, "h200", 16)
    cfg = load_config(str(path), {"batch": "48"})
    assert cfg.batch == 48


@pytest.mark.parametrize(
    ("name", "overrides", "needle"),
    [
        ("no-such-config", None, "unknown config 'no-such-config'"),
        ("dsv32-ep16", {"bogus": "1"}, "unknown key 'bogus'"),
        ("dsv32-ep16", {"batch": "0"}, "batch must be a whole number from 1"),
        ("dsv32-ep16", {"batch": "-4"}, "batch must be a whole number from 1"),
        ("dsv32-ep16", {"batch": "many"}, "--set batch=many"),
        ("dsv32-ep16", {"context_tokens": "100000000"}, "does not fit in memory"),
        ("dsv32-tp16", {"batch": "5000"}, "exceeds the KV capacity"),
        ("llama3-70b-tp8-h100", {"kv_format": "fp8_ds_mla"}, "needs an MLA model"),
        ("llama3-70b-tp8-h100", {"n_gpus": "1", "tp": "1"}, "do not fit"),
        ("dsv32-ep16", {"hardware": "tpu"}, "unknown hardware 'tpu'"),
        ("dsv32-ep16", {"ep": "4"}, "ep must be 1 or tp"),
        ("dsv32-ep16", {"peaks": "magic"}, "peaks 'magic'"),
    ],
)
def test_config_errors_are_one_line(name, overrides, needle):
    with pytest.raises(ConfigError) as info:
        load_config(name, overrides)
    message = str(info.value)
    assert needle in message and "\n" not in message
    assert isinstance(info.value, ValueError)


def test_wrong_type_in_toml_names_file_and_key(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('extends = "dsv32-ep16"\nbatch = "lots"\n')
    with pytest.raises(ConfigError, match=r"bad\.toml.*'batch' must be int"):
        load_config(str(path))
    path.write_text('extends = "dsv32-ep16"\nbatch = 3.5\n')
    with pytest.raises(ConfigError, match="'batch' must be int"):
        load_config(str(path))
    path.write_text("batch = [\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(str(path))
    with pytest.raises(ConfigError, match="not found"):
        load_config(str(tmp_path / "missing.toml"))


def test_extends_cycle(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(f'extends = "{b}"\n')
    b.write_text(f'extends = "{a}"\n')
    with pytest.raises(ConfigError, match="cycle"):
        load_config(str(a))


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("41ms", 41_000_000),
        ("350us", 350_000),
        ("1.2s", 1_200_000_000),
        ("41000000ns", 41_000_000),
        ("0.5 ms", 500_000),
    ],
)
def test_parse_duration(text, ns):
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize("text", ["41", "ms", "fast", "-3ms", "0ms"])
def test_parse_duration_rejects(text):
    with pytest.raises(ConfigError):
        parse_duration_ns(text)


def test_format_ns():
    assert format_ns(41_200_000) == "41.2 ms"
    assert format_ns(350_000) == "350 us"
    assert format_ns(12) == "12 ns"


_INLINE = """model = "traced-x"
hardware = "h100"
n_gpus = 1
tp = 1
batch = 4
context_tokens = 512
phase = "prefill"

[model_spec]
name = "X"
attention = "gqa"
n_layers = 4
d_model = 512
vocab = 1000
tied_embeddings = false
n_heads = 8
n_kv_heads = 8
head_dim = 64
dense_intermediate = 2048
"""


def test_a_config_can_carry_its_own_model(tmp_path):
    """config-draft writes the model it inferred into [model_spec]: the floor reads it like a catalog entry."""
    path = tmp_path / "draft.toml"
    path.write_text(_INLINE)
    cfg = load_config(str(path))
    assert (cfg.model.key, cfg.model.d_model, cfg.model.n_layers, cfg.model.dense_intermediate) == (
        "traced-x", 512, 4, 2048)
    path.write_text(_INLINE.replace("vocab = 1000\n", ""))
    with pytest.raises(ConfigError, match=r"^draft: \[traced-x\] lacks 'vocab'; add it$"):
        load_config(str(path))
    path.write_text(_INLINE.split("[model_spec]")[0] + 'model_spec = "qwen"\n')
    with pytest.raises(ConfigError, match="'model_spec' must be a table of model fields"):
        load_config(str(path))
