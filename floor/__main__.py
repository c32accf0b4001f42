"""Standalone CLI: `python -m tracekit.floor {floor,walls,configs}` (standard library only)."""

from __future__ import annotations

import argparse
import json
import sys

from . import report
from .config import list_configs, load_config
from .errors import ConfigError
from .roofline import compute_floor, place_measured
from .units import parse_duration_ns
from .walls import compute_walls


def parse_sets(items: list[str]) -> dict[str, str]:
    """['batch=64', 'kv_format=fp8'] -> dict; a missing '=' is a ConfigError."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set '{item}': expected key=value, e.g. --set kv_format=fp8")
        out[key.strip()] = value.strip()
    return out


def overrides_from(batch: int | None, context: int | None, sets: list[str]) -> dict[str, str]:
    """Merge --batch/--context with --set (explicit options win)."""
    out = parse_sets(sets)
    if batch is not None:
        out["batch"] = str(batch)
    if context is not None:
        out["context_tokens"] = str(context)
    return out


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="named config (see `configs`) or path to a .toml file")
    p.add_argument("--batch", type=int, help="concurrent requests in the whole deployment")
    p.add_argument("--context", type=int, help="KV length per request in tokens")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any config field, e.g. --set kv_format=fp8 (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracekit.floor", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    pf = sub.add_parser(
        "floor", help="resource table, t_opt/t_sum, binding resource, placement of a measurement"
    )
    _common(pf)
    pf.add_argument("--measured", help="measured step time, e.g. 41ms")
    pf.add_argument("--threshold", type=float, default=1.3, help="residual ratio below which to stop tuning")
    pw = sub.add_parser(
        "walls", help="wall ordering, KV capacity, frontier, crossover, TPOT-SLO reachability"
    )
    _common(pw)
    pw.add_argument("--vs", help="second config for the crossover")
    pw.add_argument("--tpot-slo", help="time-per-output-token target, e.g. 50ms")
    pc = sub.add_parser("configs", help="list the named configs")
    pc.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.command == "configs":
        cfgs = [load_config(n) for n in list_configs()]
        rows = report.config_rows(cfgs)
        print(
            json.dumps(rows, indent=2) if args.json else report.text_table(rows),
            end="" if not args.json else "\n",
        )
        return 0
    cfg = load_config(args.config, overrides_from(args.batch, args.context, args.sets))
    if args.command == "floor":
        result = compute_floor(cfg)
        placement = None
        if args.measured:
            placement = place_measured(result, parse_duration_ns(args.measured), args.threshold)
        if args.json:
            doc = result.to_dict()
            doc["placement"] = placement.to_dict() if placement else None
            print(json.dumps(doc, indent=2))
        else:
            print(report.text_table(report.part_rows(result), "resources per GPU per step"))
            print(report.text_table(report.summary_rows(result, placement), "floor"))
        return 0
    vs = load_config(args.vs) if args.vs else None
    slo = parse_duration_ns(args.tpot_slo) if args.tpot_slo else None
    walls = compute_walls(cfg, tpot_slo_ns=slo, vs=vs)
    if args.json:
        print(json.dumps(walls.to_dict(), indent=2))
    else:
        print(report.text_table(report.wall_rows(walls), f"walls of {cfg.name} (as concurrency grows)"))
        print(report.text_table(report.frontier_rows(walls), "frontier (floor)"))
        extra = report.extra_rows(walls)
        if extra:
            print(report.text_table(extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
