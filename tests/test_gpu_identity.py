"""One GPU identity: every catalog GPU has one, the data files agree on their keys, and a capture's GPU is
found the same way with and without a config (an MI300X with blank device names included)."""

from __future__ import annotations

import tomllib
from importlib import resources

import duckdb
import pytest

from tracekit import floor
from tracekit.analysis.gpu import gpu_spec, identify
from tracekit.parsers.schema import create_tables
from tracekit.store.views import create_views


def _data(name: str) -> dict:
    return tomllib.loads((resources.files("tracekit.floor") / "data" / name).read_text(encoding="utf-8"))


def test_every_catalog_gpu_has_an_identity_and_the_files_agree() -> None:
    catalog = set(floor.gpu_names())
    identities = floor.gpu_identities()
    assert set(identities) == catalog
    for key, ident in identities.items():
        assert ident["vendor"] in ("nvidia", "amd"), key
        assert ident["names"] and all(n == n.lower() for n in ident["names"]), key
    matmul = _data("matmul.toml")
    assert set(matmul) - {"attention"} <= catalog and set(matmul["attention"]) <= catalog
    assert set(_data("cost.toml")["gpu"]) <= catalog


def _store(name: str | None, sm_count: int | None, memory_bytes: int | None, major: int | None,
           minor: int | None, vendor: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    create_tables(con)
    con.execute("INSERT INTO devices VALUES (0, 0, ?, ?, ?, NULL, ?, ?, ?)",
                [name, sm_count, memory_bytes, major, minor, vendor])
    con.execute("INSERT INTO kernels (rank, device_id, start_ns, end_ns, dur_ns, name) VALUES (0, 0, 0, 1, 1, 'k')")
    create_views(con)
    return con


@pytest.mark.parametrize(("name", "sm", "memory", "major", "minor", "vendor", "key", "evidence"), [
    ("NVIDIA H100 80GB HBM3", 132, 85_045_395_456, 9, 0, "nvidia", "h100", "name"),
    (None, 304, 206_141_652_992, 9, 4, "amd", "mi300x", "properties"),  # ROCm traces leave the name blank
    ("", 304, 206_141_652_992, 9, 4, "amd", "mi300x", "properties"),
    ("NVIDIA B200", 148, None, 10, 0, "nvidia", "b200", "name"),
    (None, None, None, None, None, "nvidia", None, ""),
])
def test_identify(name, sm, memory, major, minor, vendor, key, evidence) -> None:
    gpu = identify(_store(name, sm, memory, major, minor, vendor))
    assert (gpu.key, gpu.evidence) == (key, evidence)
    spec = gpu_spec(None, gpu)
    assert (spec.key if spec else None) == key  # without a config: the identified GPU's catalog figures
    assert gpu_spec("h200", gpu).key == "h200"  # a config's hardware takes precedence


def test_unnamed_mi300x_gets_network_figures_with_and_without_config(shared_traces) -> None:
    """The MI300X vLLM trace names no device: its GPU is still the catalog MI300X for every analysis."""
    from tracekit.store.ingest import open_store

    path = shared_traces / "torch" / "tracelens__inference__vllm_decode_full__graph_execution.json.gz"
    with open_store([path], use_cache=False) as store:
        gpu = identify(store.con)
        assert gpu.key == "mi300x" and gpu.evidence == "properties"
        assert gpu_spec(None, gpu).scaleup_bytes_per_s == floor.get_gpu("mi300x").scaleup_bytes_per_s
        assert gpu_spec("mi300x", gpu).key == "mi300x"
