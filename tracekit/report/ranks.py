"""The report's ``ranks`` section as tables: one row per rank (device) with its clock, wait and transfer and
how long the others waited for it; the straggler and its cause; the transfer against the network budget."""

from __future__ import annotations

import polars as pl

from tracekit.report.document import Table, ms_text, ms_value
from tracekit.schema.report import RankRow, Ranks, Report, Straggler


def who(row: RankRow | Straggler, ranks: Ranks) -> str:
    """'rank 5', or 'rank 0 device 1' where a rank drives several devices."""
    return f"rank {row.rank}" + (f" device {row.device}" if ranks.devices_per_rank > 1 else "")


def straggler_line(ranks: Ranks) -> str:
    s = ranks.straggler
    if s is None:
        return "nobody waited in a matched collective"
    return (f"The others waited {ms_text(s.waited_for_ns)} ms for {who(s, ranks)} ({s.share:.0%} of all wait, "
            f"last to arrive in {s.instances} collectives, {ms_text(s.late_ns)} ms late at the median): "
            f"{s.cause.text}")


def per_rank_frame(ranks: Ranks) -> pl.DataFrame:
    clocks = {r: c for c in ranks.clocks for r in c.ranks or [c.rank]}
    rows = []
    for r in ranks.per_rank:
        c = clocks.get(r.rank)
        rows.append({"rank": r.rank, "device": r.device, "host": r.host,
                     "clock offset ms": ms_value(r.offset_ns), "residual ms": ms_value(c and c.residual_ns),
                     "collectives": r.collectives, "wait ms": ms_value(r.wait_ns),
                     "transfer ms": ms_value(r.transfer_ns),
                     "others waited for it ms": ms_value(r.waited_for_ns), "last in": r.last_in,
                     "step start late ms": ms_value(r.step_start_late_ns)})
    return pl.DataFrame(rows, schema={"rank": pl.Int64, "device": pl.Int64, "host": pl.String,
                                      "clock offset ms": pl.Float64, "residual ms": pl.Float64,
                                      "collectives": pl.Int64, "wait ms": pl.Float64, "transfer ms": pl.Float64,
                                      "others waited for it ms": pl.Float64, "last in": pl.Int64,
                                      "step start late ms": pl.Float64})


def network_frame(ranks: Ranks) -> pl.DataFrame:
    return pl.DataFrame([{
        "collective": r.collective, "ranks": r.ranks, "instances": r.instances,
        "size MB": round(r.size_bytes / 1e6, 3), "transfer ms": ms_value(r.transfer_ns),
        "bus GB/s": round(r.busbw_bytes_per_s / 1e9, 1),
        "catalog bus GB/s": (None if r.catalog_busbw_bytes_per_s is None
                             else round(r.catalog_busbw_bytes_per_s / 1e9, 1)),
        "budget ms": ms_value(r.budget_ns),
        "transfer / budget": None if r.transfer_over_budget is None else round(r.transfer_over_budget, 2),
    } for r in ranks.network])


def ranks_tables(report: Report) -> tuple[list[Table], list[str]]:
    """The cross-rank tables and note lines (none for a single device)."""
    ranks = report.ranks
    if not ranks:
        return [], []
    counts = ranks.instances
    note = (f"{counts.matched} collectives matched across {ranks.participants} devices (by "
            f"{' and '.join(ranks.methods) or 'nothing'}); wait {ms_text(ranks.wait_ns)} ms, transfer "
            f"{ms_text(ranks.transfer_ns)} ms in all. {straggler_line(ranks)}")
    tables = [Table("2b. across ranks: clocks, wait and transfer per rank", per_rank_frame(ranks), note=note)]
    if ranks.per_step:
        tables.append(Table("who the others waited for, per step", pl.DataFrame([{
            "step": p.step, "rank": p.rank, "device": p.device, "waited for ms": ms_value(p.waited_for_ns),
            "all wait ms": ms_value(p.wait_ns)} for p in ranks.per_step])))
    if ranks.network:
        gpu = ranks.network_gpu
        tables.append(Table("transfer against the network budget", network_frame(ranks),
                            note=f"catalog and budget of {gpu}" if gpu else "no catalog GPU: bandwidth only"))
    hosts = "; ".join(f"{h.host} {ms_text(h.offset_ns)} ms (ranks {', '.join(map(str, h.ranks))}, spread "
                      f"{ms_text(h.spread_ns)} ms)" for h in ranks.hosts)
    notes = [f"ranks: clock offset per host: {hosts}"] if hosts else []
    return tables, notes + [f"ranks: {r}" for r in ranks.reasons]
