"""Every row of docs/errors.md: bad input gives one line naming the file or option and what to do, exit 2,
and nothing written; the damaged records that tracekit reads past are dropped and shown as caveats."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from google.protobuf import descriptor_pb2

from fixtures.synth import Device, Kernel, Process, Range, Thread, TraceSpec, write_kineto, write_nsys
from fixtures.synth_rocpd import write_rocpd
from fixtures.synth_xplane import write_xplane
from tracekit.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
FORMATS = ("nsys", "kineto")
PID = 10


def spec(rank: int | None = 0, gpu: str = "NVIDIA H100 80GB HBM3", dur_ns: int = 10_000,
         kernels: bool = True) -> TraceSpec:
    """Three ProfilerStep#N steps of two kernels (of ``dur_ns`` each) on one GPU."""
    ks, rs = [], []
    t = 1_000_000
    for step in range(3):
        rs.append(Range(f"ProfilerStep#{step}", PID, PID, t - 5_000, t + 100_000))
        for i, name in enumerate(("gemm_kernel", "norm_kernel")):
            ks.append(Kernel(name, 0, 7, t + i * 20_000, dur_ns, PID, PID, t - 4_000 + i * 1_000, 500))
        t += 110_000
    return TraceSpec(devices=[Device(0, gpu, 132, 80 * 1024**3)], processes=[Process(PID, "python3")],
                     threads=[Thread(PID, PID, "python3")], kernels=ks if kernels else [], ranges=rs, rank=rank,
                     world_size=2)


def write(s: TraceSpec, path: Path, fmt: str) -> Path:
    (write_nsys if fmt == "nsys" else write_kineto)(s, path)
    return path


def trace(tmp_path: Path, fmt: str, name: str = "trace", s: TraceSpec | None = None) -> Path:
    return write(s or spec(), tmp_path / (f"{name}.sqlite" if fmt == "nsys" else f"{name}.json"), fmt)


def sql(path: Path, *statements: str) -> Path:
    con = sqlite3.connect(path)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()
    return path


def edit_json(path: Path, change: Callable[[dict], None]) -> Path:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return path


def events(doc: dict, cat: str) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("cat") == cat]


def run(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def assert_error(tmp_path: Path, args: list[object], names: str, fragment: str) -> str:
    """Exit 2, one line naming ``names`` with ``fragment`` and a remedy; no report, no half-written store."""
    out = tmp_path / "report.json"
    code, stdout, err = run(*args, "--format", "json", "--out", out)
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("tracekit: error: "), err
    assert names in lines[0] and fragment in lines[0], lines[0]
    assert "; " in lines[0], f"no remedy in: {lines[0]}"  # every message says what to do after '; '
    assert fragment in DOC.read_text(), f"docs/errors.md lacks {fragment!r}"
    assert not out.exists() and stdout == ""
    cache = tmp_path / "cache"
    assert not cache.exists() or not [p for p in cache.iterdir() if p.name.startswith(".")]
    return lines[0]


def analyze(tmp_path: Path, *inputs: Path, extra: tuple[str, ...] = ()) -> list[object]:
    return ["analyze", *inputs, "--cache-dir", tmp_path / "cache", *extra]


def caveats(tmp_path: Path, *inputs: Path) -> tuple[list[str], str]:
    code, out, err = run("analyze", *inputs, "--cache-dir", tmp_path / "cache", "--format", "json")
    assert code == 0, err
    return json.loads(out)["caveats"], err


# ---- files that are not traces ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_missing_file(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / ("gone.sqlite" if fmt == "nsys" else "gone.json")
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "no such file")


def test_directory_without_traces(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a trace")
    assert_error(tmp_path, analyze(tmp_path, folder), str(folder), "directory holds no trace files")


@pytest.mark.parametrize("suffix", [".sqlite", ".json", ".json.gz"])
def test_empty_file(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"empty{suffix}"
    path.write_bytes(b"")
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "empty file")


@pytest.mark.parametrize("suffix", [".sqlite", ".json"])
def test_not_sqlite_not_json(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"text{suffix}"
    path.write_text("hello, world\n")
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "not a trace")


@pytest.mark.parametrize("name", ["app.sqlite", "app.db"])
def test_sqlite_that_is_neither_an_nsys_export_nor_rocpd(tmp_path: Path, name: str) -> None:
    path = sql(tmp_path / name, "CREATE TABLE users (id INTEGER, name TEXT)", "INSERT INTO users VALUES (1, 'a')")
    assert_error(tmp_path, analyze(tmp_path, path), str(path),
                 "neither an Nsight Systems export (no StringIds/CUPTI tables) nor a rocpd database")


def test_truncated_xplane(tmp_path: Path) -> None:
    whole = write_xplane(tmp_path / "whole.xplane.pb").read_bytes()
    path = tmp_path / "run.xplane.pb"
    path.write_bytes(whole[: len(whole) // 2])
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "truncated or damaged XPlane protobuf")


def test_protobuf_of_another_message_named_xplane(tmp_path: Path) -> None:
    other = descriptor_pb2.FileDescriptorSet(file=[descriptor_pb2.FileDescriptorProto(
        name="model.proto", message_type=[descriptor_pb2.DescriptorProto(name="Model")])])
    path = tmp_path / "model.xplane.pb"
    path.write_bytes(other.SerializeToString())
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "protobuf is not an XSpace profile")


def test_nsys_report_without_nsys_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    path = tmp_path / "run.nsys-rep"
    path.write_bytes(b"\x00NSYS-REP" + bytes(64))
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "`nsys` is not on PATH to export it")


def test_rocpd_database_missing_a_core_table(tmp_path: Path) -> None:
    path = write_rocpd(spec().only_process(PID), tmp_path / "1234_results.db")
    db = sqlite3.connect(path)
    (table,) = db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'rocpd_kernel_dispatch_%'").fetchone()
    db.close()
    sql(path, "DROP VIEW rocpd_kernel_dispatch", f'DROP TABLE "{table}"')
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "rocpd database lacks table(s) rocpd_kernel_dispatch")


def test_nsys_report_whose_export_fails(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nsys").write_text("#!/bin/sh\necho 'cannot open report' >&2\nexit 1\n")
    (bin_dir / "nsys").chmod(0o755)
    path = tmp_path / "run.nsys-rep"
    path.write_bytes(b"\x00NSYS-REP" + bytes(64))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        assert_error(tmp_path, analyze(tmp_path, path), str(path), "failed (exit 1: cannot open report)")


def test_json_that_is_not_a_profiler_trace(tmp_path: Path) -> None:
    path = tmp_path / "package.json"
    path.write_text('{"name": "x", "version": "1.0"}')
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "not a PyTorch profiler trace")


def test_truncated_sqlite(tmp_path: Path) -> None:
    path = trace(tmp_path, "nsys")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "truncated SQLite file")


def test_truncated_json(tmp_path: Path) -> None:
    path = trace(tmp_path, "kineto")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "truncated JSON")


@pytest.mark.parametrize("damage", ["cut", "flipped"])
def test_corrupt_gzip(tmp_path: Path, damage: str) -> None:
    path = write(spec(), tmp_path / "trace.json.gz", "kineto")
    data = bytearray(path.read_bytes())
    if damage == "cut":
        data = data[: len(data) // 2]
    else:
        middle = len(data) // 2
        data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    path.write_bytes(bytes(data))
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "corrupt gzip")


@pytest.mark.parametrize("fmt", FORMATS)
def test_trace_with_no_gpu_events(tmp_path: Path, fmt: str) -> None:
    """analyze refuses a CPU-only trace; info describes it (its ranges, processes, ranks) with the caveat."""
    path = trace(tmp_path, fmt, s=spec(kernels=False))
    fragment = "no CUDA kernels" if fmt == "nsys" else "no GPU events"
    assert_error(tmp_path, analyze(tmp_path, path), str(path), fragment)
    code, out, err = run("info", path, "--cache-dir", tmp_path / "cache", "--format", "json")
    assert code == 0, err
    body = json.loads(out)
    assert body["events"][0]["kernels"] == 0 and body["events"][0]["ranges"] == 3
    assert [c["kind"] for c in body["caveats"]].count("no_gpu_activity") == 1
    assert any("no GPU activity" in c["text"] and fragment in c["text"] for c in body["caveats"])
    for command in ("kernels", "api", "nvtx"):
        assert run(command, path, "--cache-dir", tmp_path / "cache")[0] == 0, command


# ---- damaged records -------------------------------------------------------------------------------


def negative_kernels(tmp_path: Path, fmt: str, only_first: bool) -> Path:
    path = trace(tmp_path, fmt)
    if fmt == "nsys":
        where = " WHERE rowid = (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)" if only_first else ""
        return sql(path, f'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 1000{where}')
    return edit_json(path, lambda doc: [e.update(dur=-1.0) for e in events(doc, "kernel")[: 1 if only_first else None]])


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_kernel_with_negative_duration_is_an_error(tmp_path: Path, fmt: str) -> None:
    path = negative_kernels(tmp_path, fmt, only_first=False)
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "no usable GPU event")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_kernel_with_negative_duration_is_dropped_with_a_caveat(tmp_path: Path, fmt: str) -> None:
    path = negative_kernels(tmp_path, fmt, only_first=True)
    found, _ = caveats(tmp_path, path)
    assert [c for c in found if "negative_duration: 1 (kernels that end before they start" in c], found
    code, out, _ = run("kernels", path, "--cache-dir", tmp_path / "cache", "--format", "json")
    assert code == 0 and sum(r["instances"] for r in json.loads(out)["kernels by name"]) == 5
    assert min(r["min_ns"] for r in json.loads(out)["kernels by name"]) >= 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_zero_duration_kernels_are_kept(tmp_path: Path, fmt: str) -> None:
    path = trace(tmp_path, fmt)
    if fmt == "nsys":
        sql(path, 'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start')
    else:
        edit_json(path, lambda doc: [e.update(dur=0) for e in events(doc, "kernel")])
    code, out, err = run("kernels", path, "--cache-dir", tmp_path / "cache", "--format", "json")
    rows = json.loads(out)["kernels by name"]
    assert code == 0 and sum(r["instances"] for r in rows) == 6 and {r["max_ns"] for r in rows} == {0}, err
    found, _ = caveats(tmp_path, path)
    assert not [c for c in found if "negative_duration" in c]


@pytest.mark.parametrize("fmt", FORMATS)
def test_ranges_and_calls_that_end_before_they_start_are_dropped_with_a_caveat(tmp_path: Path, fmt: str) -> None:
    path = trace(tmp_path, fmt)
    if fmt == "nsys":
        sql(path, 'UPDATE NVTX_EVENTS SET "end" = start - 10 WHERE text = \'ProfilerStep#1\'',
            'UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET "end" = start - 10 WHERE rowid = 1')
    else:
        def change(doc: dict) -> None:
            next(e for e in events(doc, "user_annotation") if e["name"] == "ProfilerStep#1")["dur"] = -0.01
            events(doc, "cuda_runtime")[0]["dur"] = -0.01
        edit_json(path, change)
    found, _ = caveats(tmp_path, path)
    assert [c for c in found if "negative_duration: 1 (ranges that end before they start" in c], found
    assert [c for c in found if "negative_duration: 1 (API calls that end before they start" in c], found


@pytest.mark.parametrize("fmt", FORMATS)
def test_calls_without_a_thread_are_dropped_with_a_caveat(tmp_path: Path, fmt: str) -> None:
    path = trace(tmp_path, fmt)
    if fmt == "nsys":
        sql(path, "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = NULL WHERE rowid = 1")
    else:
        edit_json(path, lambda doc: events(doc, "cuda_runtime")[0].pop("pid"))
    found, _ = caveats(tmp_path, path)
    assert [c for c in found if "incomplete_record: 1 (API calls without a start, end, process or thread" in c], found


def test_kernel_whose_name_is_missing_is_kept_as_unnamed(tmp_path: Path) -> None:
    path = sql(trace(tmp_path, "nsys"), "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 999999, "
               "shortName = 999999 WHERE rowid = (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    found, _ = caveats(tmp_path, path)
    assert [c for c in found if "unnamed_kernel: 1" in c], found
    code, out, _ = run("kernels", path, "--cache-dir", tmp_path / "cache", "--format", "json")
    assert code == 0 and "(unnamed kernel)" in {r["name"] for r in json.loads(out)["kernels by name"]}


def test_nsys_timestamp_beyond_int64_is_an_error(tmp_path: Path) -> None:
    path = sql(trace(tmp_path, "nsys"), 'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 1e19, "end" = 1.1e19 '
               "WHERE rowid = 1")
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "does not fit in a 64-bit integer")


def test_kineto_base_time_that_overflows_int64_is_an_error(tmp_path: Path) -> None:
    path = edit_json(trace(tmp_path, "kineto"), lambda doc: doc.update(baseTimeNanoseconds=2**63 - 1000))
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "does not fit in a 64-bit integer")


def test_kineto_event_whose_ns_time_overflows_is_dropped_with_a_caveat(tmp_path: Path) -> None:
    path = edit_json(trace(tmp_path, "kineto"), lambda doc: events(doc, "kernel")[0].update(ts=9.3e15))
    found, _ = caveats(tmp_path, path)
    assert [c for c in found if "(no readable ts/dur: gpu)" in c], found


def test_kineto_with_every_gpu_time_overflowing_is_an_error(tmp_path: Path) -> None:
    path = edit_json(trace(tmp_path, "kineto"), lambda doc: [e.update(ts=9.3e15) for e in events(doc, "kernel")])
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "no GPU event with readable times")


# ---- several files ---------------------------------------------------------------------------------


def test_kineto_files_claiming_the_same_rank(tmp_path: Path) -> None:
    a = trace(tmp_path, "kineto", "a", spec(rank=0))
    b = trace(tmp_path, "kineto", "b", spec(rank=0, dur_ns=11_000))
    found, err = caveats(tmp_path, a, b)  # both are analysed; the second under a free rank, with one line
    line = f"{a} and {b}: both claim rank 0; the second is analysed as rank 1 (give one file per rank)"
    assert line in found and f"tracekit: warning: {line}" in err
    assert "both claim rank" in DOC.read_text()


@pytest.mark.parametrize("fmt", FORMATS)
def test_same_file_twice(tmp_path: Path, fmt: str) -> None:
    folder = tmp_path / "run"  # the report goes beside it, not inside the input folder
    folder.mkdir()
    path = trace(folder, fmt)
    assert_error(tmp_path, analyze(tmp_path, path, folder), str(path), "given twice")


@pytest.mark.parametrize("fmt", FORMATS)
def test_one_capture_under_two_names(tmp_path: Path, fmt: str) -> None:
    a = trace(tmp_path, fmt, "rank0", spec(rank=None))
    b = trace(tmp_path, fmt, "rank1", spec(rank=None))
    found, err = caveats(tmp_path, a, b)  # the copy is left out with one line; the analysis runs on the rest
    line = f"{a} and {b}: hold the very same kernels (one capture given twice?); {b} is left out"
    assert line in found and f"tracekit: warning: {line}" in err
    assert "hold the very same kernels" in DOC.read_text()


@pytest.mark.parametrize("fmt", FORMATS)
def test_ranks_on_different_gpu_models_get_a_caveat(tmp_path: Path, fmt: str) -> None:
    a = trace(tmp_path, fmt, "rank0", spec(rank=0))
    b = trace(tmp_path, fmt, "rank1", spec(rank=1, gpu="NVIDIA A100-SXM4-80GB", dur_ns=11_000))
    found, err = caveats(tmp_path, a, b)
    mixed = [c for c in found if c.startswith("ranks ran on different GPU models")]
    assert mixed and "NVIDIA A100-SXM4-80GB on rank 1" in mixed[0] and "NVIDIA H100 80GB HBM3 on rank 0" in mixed[0]
    assert err.strip() == f"tracekit: warning: {mixed[0]}"
    assert "ranks ran on different GPU models" in DOC.read_text()
    same = trace(tmp_path, fmt, "rank1b", spec(rank=1, dur_ns=12_000))
    found, err = caveats(tmp_path, a, same)
    assert not [c for c in found if "different GPU models" in c] and err == ""


# ---- options -----------------------------------------------------------------------------------------


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return trace(tmp_path, "nsys")


def test_unknown_config_name(tmp_path: Path, good: Path) -> None:
    assert_error(tmp_path, analyze(tmp_path, good, extra=("--config", "no-such-config")), "'no-such-config'",
                 "unknown config")


def test_config_file_with_a_wrong_type(tmp_path: Path, good: Path) -> None:
    cfg = tmp_path / "mine.toml"
    cfg.write_text('extends = "dsv32-ep16"\nbatch = "many"\n')
    assert_error(tmp_path, analyze(tmp_path, good, extra=("--config", str(cfg))), f"{cfg}: key 'batch'",
                 "must be int")


def test_config_file_with_an_unknown_key(tmp_path: Path, good: Path) -> None:
    cfg = tmp_path / "mine.toml"
    cfg.write_text('extends = "dsv32-ep16"\nbatchsize = 64\n')
    assert_error(tmp_path, analyze(tmp_path, good, extra=("--config", str(cfg))), f"{cfg}: unknown key 'batchsize'",
                 "unknown key")


def test_set_of_a_field_that_does_not_exist(tmp_path: Path, good: Path) -> None:
    assert_error(tmp_path, analyze(tmp_path, good, extra=("--config", "dsv32-ep16", "--set", "gpus=8")),
                 "--set: unknown key 'gpus'", "unknown key")


@pytest.mark.parametrize("command", ["analyze", "floor"])
def test_batch_zero(tmp_path: Path, good: Path, command: str) -> None:
    args = analyze(tmp_path, good) if command == "analyze" else ["floor"]
    assert_error(tmp_path, [*args, "--config", "dsv32-ep16", "--batch", "0"], "'--batch'",
                 "0 is not in the range x>=1")


@pytest.mark.parametrize("command", ["analyze", "floor"])
def test_context_that_cannot_fit_in_memory(tmp_path: Path, good: Path, command: str) -> None:
    args = analyze(tmp_path, good) if command == "analyze" else ["floor"]
    assert_error(tmp_path, [*args, "--config", "dsv32-ep16", "--context", "100000000"], "--context",
                 "does not fit in memory beside the weights")


# ---- option values (issue 28): finite, in range, whole for integer fields ---------------------------------

INT_FIELDS = ("n_gpus", "tp", "ep", "dp_attention", "batch", "context_tokens", "reserve_per_gpu_bytes", "mtp_depth",
              "moe_route_limit", "micro_batch", "dp", "pp", "pp_interleave", "zero", "sp", "pp_first_layers")


@pytest.mark.parametrize("key", INT_FIELDS)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e30", "-1", "1.5"])
def test_set_of_an_integer_field_out_of_range(tmp_path: Path, key: str, value: str) -> None:
    """Every integer field refuses NaN, infinities, huge, negative and fractional values with one line
    naming the option and the field (before: ValueError or OverflowError as an internal error)."""
    if value == "-1" and key in ("dp", "zero", "pp_first_layers", "reserve_per_gpu_bytes", "mtp_depth",
                                 "moe_route_limit"):
        value = "-5"  # 0 is allowed there; -5 is not
    line = assert_error(tmp_path, ["floor", "--config", "dsv32-ep16", "--set", f"{key}={value}"],
                        f"--set {key}={value}: {key} must be", "must be a whole number from")
    assert "got" in line


@pytest.mark.parametrize(("key", "value"), [("tokens_per_step", "nan"), ("capacity_factor", "inf"),
                                            ("tokens_per_step", "-inf"), ("context_tokens", "1e308"),
                                            ("tokens_per_step", "1e30")])
def test_set_of_a_float_or_huge_value(tmp_path: Path, key: str, value: str) -> None:
    assert_error(tmp_path, ["floor", "--config", "dsv32-ep16", "--set", f"{key}={value}"], f"--set {key}={value}",
                 "must be a")


@pytest.mark.parametrize("value", ["power_w=inf", "gpu_cost_usd=nan", "hbm_stacks=99999999999999999999"])
def test_set_of_a_cost_field_that_is_not_finite(tmp_path: Path, value: str) -> None:
    assert_error(tmp_path, ["cost", "--config", "dsv32-ep16", "--set", value], f"--set {value.split('=')[0]}=",
                 "must be a finite number up to")


@pytest.mark.parametrize("command", ["analyze", "floor"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_threshold_that_is_not_finite(tmp_path: Path, good: Path, command: str, value: str) -> None:
    """--threshold nan passed the range check (NaN compares false) and flipped the verdict; now refused."""
    args = analyze(tmp_path, good) if command == "analyze" else ["floor", "--config", "dsv32-ep16"]
    fragment = "is not a finite number" if value == "nan" else "is not in the range"
    assert_error(tmp_path, [*args, "--threshold", value], "'--threshold'", fragment)


def test_duration_that_overflows(tmp_path: Path) -> None:
    assert_error(tmp_path, ["floor", "--config", "dsv32-ep16", "--measured", "1e400ms"], "--measured",
                 "is too long; give at most")


def test_fail_if_slower_that_is_not_finite(tmp_path: Path, good: Path) -> None:
    assert_error(tmp_path, ["diff", good, good, "--fail-if-slower", "nan%", "--cache-dir", tmp_path / "cache"],
                 "--fail-if-slower", "not a finite percentage")


@pytest.mark.parametrize("regex", ["a{99999999}", "(a)\\1", "(?=a)x", "(?<!a)b"])
def test_step_regex_that_re2_refuses(tmp_path: Path, good: Path, regex: str) -> None:
    """Python accepts these; DuckDB's RE2 does not (repetition over 1000, backreferences, lookaround)."""
    assert_error(tmp_path, analyze(tmp_path, good, extra=("--step", regex)), "--step", "not a regex the store can run")


def test_step_regex_that_is_no_regex(tmp_path: Path, good: Path) -> None:
    assert_error(tmp_path, analyze(tmp_path, good, extra=("--step", "[")), "--step '['", "not a regex (")


def test_config_name_too_long_for_a_file_name(tmp_path: Path, good: Path) -> None:
    name = "x" * 5000
    line = assert_error(tmp_path, analyze(tmp_path, good, extra=("--config", name)), "--config 'xxx",
                        "no readable file (File name too long) and no named config")
    assert "…" in line and len(line) < 2000  # the name is echoed cut in the middle


# ---- inputs that are not regular files (issue 28) ------------------------------------------------------


def test_fifo_input_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    assert_error(tmp_path, analyze(tmp_path, fifo), str(fifo), "a named pipe (FIFO), not a trace file")
    folder = tmp_path / "run"  # also inside a folder of rank files
    folder.mkdir()
    os.mkfifo(folder / "rank0.sqlite")
    assert_error(tmp_path, analyze(tmp_path, folder), "rank0.sqlite", "a named pipe (FIFO), not a trace file")


def test_socket_and_device_inputs_are_refused(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "s.sqlite"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        assert_error(tmp_path, analyze(tmp_path, path), str(path), "a socket, not a trace file")
    assert_error(tmp_path, analyze(tmp_path, Path("/dev/zero")), "/dev/zero", "a device, not a trace file")


def test_symlink_loop_input(tmp_path: Path) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    assert_error(tmp_path, analyze(tmp_path, loop), str(loop), "symbolic link loop")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files of any mode")
def test_unreadable_file_in_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    path = trace(folder, "kineto", "rank0")
    path.chmod(0)
    assert_error(tmp_path, analyze(tmp_path, folder), str(path), "cannot read (permission denied)")


def test_decompression_bomb_is_stopped(tmp_path: Path) -> None:
    """A .json.gz that expands far beyond its size stops at the limit (here lowered with --max-decompressed;
    the default is 200x the compressed size, at least 256 MiB), with memory held to the limit."""
    import gzip

    from tracekit.files import decompressed_limit

    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb") as g:
        g.write(b'{"traceEvents": [' + b" " * (64 * 2**20))
    assert path.stat().st_size < 2**20 and decompressed_limit(path.stat().st_size) == 256 * 2**20
    assert_error(tmp_path, analyze(tmp_path, path, extra=("--max-decompressed", str(8 * 2**20))), str(path),
                 "expands to more than")


def test_durations_that_overflow_int64_sums(tmp_path: Path) -> None:
    """Absurd kernel durations summed past int64: was `per_step_ns = -9223372036854775808` with exit 0."""
    path = sql(trace(tmp_path, "nsys"), 'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + 4000000000000000000')
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "durations add up to")
    assert_error(tmp_path, ["memory", path, "--cache-dir", tmp_path / "cache"], str(path), "durations add up to")


# ---- outputs (issue 28): never replaced when not a regular file; OSError is one line -------------------


def out_error(tmp_path: Path, good: Path, out: object, fragment: str, option: str = "--out",
              command: str = "kernels") -> str:
    code, stdout, err = run(command, good, "--cache-dir", tmp_path / "cache", option, out)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("tracekit: error: ") and option in lines[0], err
    assert fragment in lines[0] and "; " in lines[0], lines[0]
    assert fragment in DOC.read_text(), f"docs/errors.md lacks {fragment!r}"
    return lines[0]


def test_out_special_files_are_left_as_they_were(tmp_path: Path, good: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out_error(tmp_path, good, fifo, "a named pipe (FIFO), not a regular file; it is left as it is")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    folder = tmp_path / "folder"
    folder.mkdir()
    out_error(tmp_path, good, folder, "is a directory")  # click's own check
    assert folder.is_dir() and not list(folder.iterdir())
    device = tmp_path / "zero"  # a device node other than /dev/null: mknod where allowed, else /dev/zero itself
    try:
        os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    except PermissionError:
        device = Path("/dev/zero")
    out_error(tmp_path, good, device, "a device, not a regular file")
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_out_symlink_writes_its_target_and_stays_a_link(tmp_path: Path, good: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, _, err = run("kernels", good, "--cache-dir", tmp_path / "cache", "--format", "json", "--out", link)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["schema"] == "tracekit.kernels/v1"


def test_out_through_null_device_and_stdout_links(tmp_path: Path, good: Path) -> None:
    """/dev/null, and a link to it, are written through and stay what they are; a node like /dev/null that
    the test makes (mknod c 1 3) too."""
    null_link = tmp_path / "null"
    null_link.symlink_to(os.devnull)
    for out in (os.devnull, null_link):
        code, stdout, err = run("kernels", good, "--cache-dir", tmp_path / "cache", "--out", out)
        assert code == 0 and stdout == "" and err == "", err
    assert null_link.is_symlink() and stat.S_ISCHR(os.stat(os.devnull).st_mode)
    node = tmp_path / "n"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        return
    code, _, err = run("kernels", good, "--cache-dir", tmp_path / "cache", "--out", node)
    assert code == 0 and stat.S_ISCHR(os.lstat(node).st_mode), err


@pytest.mark.parametrize(("out", "fragment"), [("", "is a folder; name a file path inside it"),
                                               ("/proc/version", "cannot write"),
                                               ("/sys/kernel/x.json", "cannot write"),
                                               ("/dev/fd/97", "descriptor 97 is not open")])
def test_out_paths_that_cannot_be_written(tmp_path: Path, good: Path, out: str, fragment: str) -> None:
    out_error(tmp_path, good, out, fragment)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into folders of any mode")
def test_out_into_a_folder_without_write_permission(tmp_path: Path, good: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    out_error(tmp_path, good, folder / "r.json", "(permission denied)")


def test_two_outputs_of_one_command_never_share_a_path(tmp_path: Path, good: Path) -> None:
    out = tmp_path / "x.json"
    code, _, err = run("export", good, "--cache-dir", tmp_path / "cache", "--perfetto", out, "--out", out)
    assert code == 2 and "also the path of" in err and len(err.strip().splitlines()) == 1, err
    assert "also the path of" in DOC.read_text() and not out.exists()


def test_a_full_disk_under_out_is_one_line_and_leaves_nothing(tmp_path: Path, good: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write of the output file fails with ENOSPC after a few bytes (a full tmpfs); the temporary file
    is removed and the message names --out, the path and the cause."""
    import errno
    import io

    import tracekit.files as files

    class Full(io.RawIOBase):
        def __init__(self, fd: int, *_: object, **__: object) -> None:
            self.fd = fd

        def writable(self) -> bool:
            return True

        def write(self, b: object) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self) -> None:
            os.close(self.fd)
            super().close()

    assert run("kernels", good, "--cache-dir", tmp_path / "cache")[0] == 0  # the store, before the disk fills
    monkeypatch.setattr(files.os, "fdopen", lambda fd, *a, **k: Full(fd))
    out = tmp_path / "o" / "r.json"
    line = out_error(tmp_path, good, out, "cannot write (No space left on device)")
    assert str(out) in line and not out.exists() and not list(out.parent.iterdir())


def test_a_full_cache_disk_is_not_called_a_damaged_trace(tmp_path: Path, good: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC while the store is written: the message says where and what to do (it said "the file is
    damaged ... export it again")."""
    import errno

    import tracekit.store.ingest as ingest

    def full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ingest, "crc32_of", full)
    assert_error(tmp_path, analyze(tmp_path, good), str(good), "could not write its store in")


def test_every_number_field_has_a_range() -> None:
    """A number field added to the config gets a range in FIELD_RANGES (else only finiteness is checked)."""
    from tracekit.floor.config import FIELD_RANGES
    from tracekit.floor.deployment import FIELD_TYPES

    assert [k for k, t in FIELD_TYPES.items() if t in (int, float) and k not in FIELD_RANGES] == []


@pytest.mark.parametrize("lead", [b"\xef\xbb\xbf", b" " * 40 + b"\n" * 40], ids=["bom", "whitespace"])
def test_json_with_a_byte_order_mark_or_leading_whitespace_is_a_trace(tmp_path: Path, lead: bytes) -> None:
    """Valid JSON after a UTF-8 BOM or much whitespace reads as the trace it is (it was 'not a trace')."""
    path = trace(tmp_path, "kineto")
    plain = run("kernels", path, "--no-cache", "--format", "json")
    path.write_bytes(lead + path.read_bytes())
    code, out, err = run("kernels", path, "--no-cache", "--format", "json")
    assert code == 0, err
    assert json.loads(out) == json.loads(plain[1])


def test_an_empty_schema_3_25_export_gets_one_line(tmp_path: Path, shared_traces: Path) -> None:
    """Every table of a real 3.25 export, no row in any: analyze says what is missing (it was a bare
    BinderException: adbc types an empty table's columns int64); info describes the empty capture."""
    path = tmp_path / "empty.sqlite"
    con = sqlite3.connect(path)
    con.executescript((shared_traces / "nsys" / "schema-3.25.sql").read_text())
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        con.execute(f'DELETE FROM "{table}"')
    con.commit()
    con.close()
    assert_error(tmp_path, analyze(tmp_path, path), str(path), "has no CUDA kernels")
    code, out, err = run("info", path, "--no-cache", "--format", "json")
    assert code == 0, err
