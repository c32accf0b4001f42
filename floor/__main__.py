"""Standalone CLI: `python -m tracekit.floor {floor,walls,configs}` (standard library only).

Configs are TOML files: `--config PATH`, or `--config NAME --config-dir DIR` for DIR/NAME.toml.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import report
from .config import Resolver, config_names, load_config, parse_sets
from .errors import ConfigError
from .placement import NEAR_FLOOR_THRESHOLD, place_measured
from .roofline import compute_floor
from .units import parse_duration_ns
from .walls import compute_walls


def overrides_from(batch: int | None, context: int | None, sets: list[str]) -> dict[str, str]:
    """Merge --batch/--context with --set (explicit options win)."""
    out = parse_sets(sets)
    if batch is not None:
        out["batch"] = str(batch)
    if context is not None:
        out["context_tokens"] = str(context)
    return out


def _resolver(config_dir: str | None) -> Resolver | None:
    """NAME -> DIR/NAME.toml when --config-dir is given."""
    if config_dir is None:
        return None
    return lambda name: Path(config_dir) / f"{name}.toml"


def _load(ref: str, overrides: dict[str, str], config_dir: str | None):
    resolve = _resolver(config_dir)
    path = Path(ref)
    if resolve is not None and not ref.endswith(".toml") and not path.is_file():
        path = resolve(ref)
    return load_config(path, overrides, resolve)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="path to a config .toml (or a NAME with --config-dir)")
    p.add_argument("--config-dir", help="folder of named configs: NAME means DIR/NAME.toml (also for `extends`)")
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
    pf.add_argument("--threshold", type=float, default=NEAR_FLOOR_THRESHOLD,
                    help="residual ratio below which to stop tuning")
    pw = sub.add_parser(
        "walls", help="wall ordering, KV capacity, frontier, crossover, TPOT-SLO reachability"
    )
    _common(pw)
    pw.add_argument("--vs", help="second config for the crossover (same --context/--batch/--set)")
    pw.add_argument("--tpot-slo", help="time-per-output-token target, e.g. 50ms")
    pc = sub.add_parser("configs", help="list the configs in a folder")
    pc.add_argument("folder", help="folder of NAME.toml configs")
    pc.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.command == "configs":
        folder = Path(args.folder)
        cfgs = [load_config(folder / f"{n}.toml", resolve=_resolver(args.folder)) for n in config_names(folder)]
        rows = report.config_rows(cfgs)
        print(
            json.dumps(rows, indent=2) if args.json else report.text_table(rows),
            end="" if not args.json else "\n",
        )
        return 0
    overrides = overrides_from(args.batch, args.context, args.sets)
    if args.command == "floor":
        result = compute_floor(_load(args.config, overrides, args.config_dir))
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
    swept = {**overrides, "batch": "1"}  # walls sweep the batch from 1 whatever the config says
    cfg = _load(args.config, swept, args.config_dir)
    vs = _load(args.vs, swept, args.config_dir) if args.vs else None
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
