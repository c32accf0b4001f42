"""`python -m tracekit.floor` (argparse, stdlib) and the click commands in tracekit.cli_floor."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tracekit.budgets.configs import configs_dir
from tracekit.cli.floor import configs_cmd, floor_cmd, walls_cmd
from tracekit.floor.__main__ import main

DIR = str(configs_dir())


def test_module_floor_json(capsys):
    path = str(configs_dir() / "dsv32-ep16.toml")
    assert main(["floor", "--config", path, "--batch", "64", "--measured", "41ms", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["config"]["batch"] == 64 and doc["peak_kind"] == "physical"
    assert doc["expected_peak_kind"] == "achievable" and doc["expected_ns"] > doc["t_opt_ns"]
    assert doc["t_opt_ns"] <= doc["t_sum_ns"]
    assert doc["placement"]["measured_ns"] == 41_000_000
    assert all(isinstance(p["hbm_ns"], int) for p in doc["parts"])


def test_module_walls_and_configs_text(capsys):
    assert main(["walls", "--config", "dsv32-ep16", "--config-dir", DIR, "--vs", "dsv32-tp16",
                 "--tpot-slo", "50ms"]) == 0
    out = capsys.readouterr().out
    assert "kv_capacity" in out and "crossover" in out
    assert main(["configs", DIR]) == 0
    assert "dsv32-tp16" in capsys.readouterr().out


def test_module_loads_paths_not_names(capsys):
    """floor/ reads the file it is given; names belong to tracekit.budgets (or to --config-dir)."""
    assert main(["floor", "--config", "dsv32-ep16"]) == 2
    assert "not found" in capsys.readouterr().err


def test_module_config_error_exit_2(capsys):
    assert main(["floor", "--config", "dsv32-ep16", "--config-dir", DIR, "--set", "batch=0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "batch must be a whole number from 1" in err


def test_click_floor_json():
    res = CliRunner().invoke(
        floor_cmd, ["--config", "llama3-70b-tp8-h100", "--measured", "20ms", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["binding"] in ("hbm", "compute", "network")
    assert doc["placement"]["verdict"] in ("near-floor", "above-floor")


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_click_walls_formats(fmt):
    res = CliRunner().invoke(walls_cmd, ["--config", "dsv32-ep16", "--vs", "dsv32-tp16", "--format", fmt])
    assert res.exit_code == 0, res.output
    assert "capacity" in res.output


def test_click_configs():
    res = CliRunner().invoke(configs_cmd, ["--format", "json"])
    assert res.exit_code == 0
    assert "dsv32-ep16" in res.output


def test_click_bad_duration_is_usage_error():
    res = CliRunner().invoke(floor_cmd, ["--config", "dsv32-ep16", "--measured", "41"])
    assert res.exit_code == 2 and "--measured" in res.output


def test_click_plot(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "walls.png"
    res = CliRunner().invoke(walls_cmd, ["--config", "qwen3-8b-tp1-h100", "--plot", str(out)])
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 0


TP16_8K = ["--context", "8192", "--set", "kv_format=bf16", "--set", "reserve_per_gpu_bytes=10e9"]


def test_walls_sweeps_from_one_whatever_the_config_batch():
    """dsv32-tp16 says batch = 128, over its KV capacity at 8K with a BF16 latent: walls still answers where
    the capacity is, and --batch reports the configs at that concurrency instead of failing."""
    from tracekit.budgets.configs import load_config

    res = CliRunner().invoke(walls_cmd, ["--config", "dsv32-tp16", *TP16_8K, "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    want = load_config("dsv32-tp16", {"batch": "1", "context_tokens": "8192", "kv_format": "bf16",
                                      "reserve_per_gpu_bytes": "10e9"}).kv_capacity_requests
    assert doc["kv_capacity_requests"] == want and 60 <= want <= 90
    assert doc["walls"][-1] == {**doc["walls"][-1], "name": "kv_capacity", "batch": want}


def test_walls_vs_gets_the_same_context_batch_and_sets():
    from tracekit.budgets.configs import load_config
    from tracekit.floor import compute_floor

    res = CliRunner().invoke(walls_cmd, ["--config", "dsv32-tp16", *TP16_8K, "--vs", "dsv32-ep16", "--batch", "64",
                                         "--format", "json"])
    assert res.exit_code == 0, res.output
    tp, ep = json.loads(res.output)["at_batch"]
    settings = {"batch": "64", "context_tokens": "8192", "kv_format": "bf16", "reserve_per_gpu_bytes": "10e9"}
    for point, name in ((tp, "dsv32-tp16"), (ep, "dsv32-ep16")):
        assert point["config"] == name and point["fits"]
        assert point["t_opt_ns"] == compute_floor(load_config(name, settings)).t_opt_ns  # --set reached both
    res = CliRunner().invoke(walls_cmd, ["--config", "dsv32-tp16", *TP16_8K, "--vs", "dsv32-ep16", "--batch", "500",
                                         "--format", "json"])
    tp, ep = json.loads(res.output)["at_batch"]
    assert not tp["fits"] and ep["fits"]


def test_set_without_equals_is_a_usage_error_naming_set():
    res = CliRunner().invoke(floor_cmd, ["--config", "dsv32-ep16", "--set", "batch"])
    assert res.exit_code == 2 and "--set" in res.output and "key=value" in res.output
