"""`tracekit info`: what a capture holds and what it cannot tell (capture caveats)."""

from __future__ import annotations

import duckdb
import polars as pl

from tracekit.analysis.attribution import register_attribution
from tracekit.analysis.caveats import capture_caveats, caveat_texts
from tracekit.analysis.model_shape import infer_shape
from tracekit.analysis.steps import step_candidates
from tracekit.budgets.classify import load_rules
from tracekit.report.document import Document, Table
from tracekit.schema.info import typed_info
from tracekit.store.ingest import Store


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | None = None) -> pl.DataFrame:
    return con.sql(sql, params=params or None).pl()


def _capture_tables(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, ...]:
    """What the capture holds: devices, processes, streams and event counts per rank."""
    devices = _frame(con, """
        SELECT rank, device_id, name, sm_count, memory_bytes, compute_major, compute_minor
        FROM devices ORDER BY rank, device_id
    """)
    processes = _frame(con, """
        SELECT p.rank, p.pid, p.name, (SELECT count(*) FROM threads t WHERE t.rank = p.rank AND t.pid = p.pid)
               AS threads
        FROM processes p ORDER BY p.rank, p.pid
    """)
    streams = _frame(con, """
        SELECT rank, device_id, stream_id, count(*) AS kernels, sum(dur_ns)::BIGINT AS kernel_ns,
               min(start_ns) AS first_ns, max(end_ns) AS last_ns
        FROM kernels GROUP BY ALL ORDER BY rank, device_id, stream_id
    """)
    counts = _frame(con, """
        SELECT t.rank,
          (SELECT count(*) FROM kernels k WHERE k.rank = t.rank) AS kernels,
          (SELECT count(*) FROM memops m WHERE m.rank = t.rank) AS memops,
          (SELECT count(*) FROM api_calls a WHERE a.rank = t.rank AND NOT a.is_duplicate) AS api_calls,
          (SELECT count(*) FROM ranges r WHERE r.rank = t.rank) AS ranges
        FROM trace_info t ORDER BY t.rank
    """)
    return devices, processes, streams, counts


def info_document(store: Store) -> Document:
    """Every section of `tracekit info` for an open store."""
    con = store.con
    files = pl.DataFrame(
        {"rank": [r for f in store.files for r in f.ranks],
         "file": [str(f.source) for f in store.files for _ in f.ranks],
         "cached": [f.reused for f in store.files for _ in f.ranks]}
    )
    traces = _frame(con, """
        SELECT rank, source_format AS format, format_version, product_version,
               start_ns, end_ns, end_ns - start_ns AS span_ns
        FROM trace_info ORDER BY rank
    """)
    files = files.join(traces, on="rank", how="left")
    devices, processes, streams, counts = _capture_tables(con)
    notes = _frame(con, "SELECT rank, kind, count, detail FROM read_notes ORDER BY rank, kind, detail")
    domains = _frame(con, """
        SELECT rank, source, coalesce(domain, '(default)') AS domain, count(*) AS ranges
        FROM ranges GROUP BY ALL ORDER BY rank, source, domain
    """)
    candidates = pl.DataFrame(step_candidates(con), schema={
        "pattern": pl.String, "count": pl.Int64, "ranks": pl.Int64, "median_ns": pl.Int64, "example": pl.String,
        "auto": pl.String, "step_regex": pl.String})
    caveats = capture_caveats(con)
    register_attribution(con, load_rules())
    shape = infer_shape(con)
    fields = ("hidden", "intermediate", "heads", "kv_heads", "head_dim", "vocab", "experts", "layers", "block", "dtype")
    model = pl.DataFrame({"field": [f for f in fields if getattr(shape, f) is not None],
                          "value": [str(getattr(shape, f)) for f in fields if getattr(shape, f) is not None],
                          "from": [shape.evidence.get(f.replace("kv_heads", "heads").replace("head_dim", "heads")
                                                      .replace("block", "layers"), "") for f in fields
                                   if getattr(shape, f) is not None]},
                         schema={"field": pl.String, "value": pl.String, "from": pl.String})
    doc = Document(
        title="tracekit info",
        tables=[
            Table("files", files),
            Table("devices", devices, note=None if devices.height else "no device properties in the capture"),
            Table("processes", processes),
            Table("streams", streams),
            Table("events", counts),
            Table("range domains", domains),
            Table("step candidates", candidates,
                  note="most frequent NVTX range / annotation names (digits as <n>); pass step_regex as --step; "
                  "auto: what analyze picks without --step" if candidates.height else "no NVTX ranges or annotations"),
            Table("model shape", model, note="inferred from the ops' recorded shapes (tracekit config-draft writes "
                  "a config from it)" if model.height else "the trace records no op shapes to infer a model from"),
            Table("read notes", notes, note="what the reader skipped or could not read; caveats list those that "
                  "limit an analysis"),
        ],
        notes=caveat_texts(caveats) + store.warnings,
    )
    doc.data = {t.title.replace(" ", "_"): t.frame.to_dicts() for t in doc.tables}
    doc.data["caveats"] = [{"kind": c.kind, "rank": c.rank, "text": c.text} for c in caveats]
    typed_info(doc.data)  # the contract: a table or column without its field in tracekit/schema/info.py fails here
    return doc
