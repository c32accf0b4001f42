"""Each GPU operation attributed to the host op that launched it, and to the modules around that op.

Two steps, kept apart so that another mapping can feed the second (a replayed graph's kernels mapped to the
ops that captured them):
1. ``launching_nodes``: kernel -> the innermost host range (cpu op, ``nn.Module`` python function or
   record_function range) open on the launching thread when the launch call began.
2. ``attribute``: from that node up its parents, the op *unit* that owns the kernel's time: the outermost
   cpu op on the chain that has a work model (``tracekit.floor.ops``), so ``aten::linear`` owns the
   ``aten::addmm`` kernels under it and nothing is counted twice; the innermost module; and whether the
   kernel belongs to attention (under an attention op, or under an attention module but not under one of its
   projections: the math path's score GEMMs, scaling and softmax, rotary and q/k norms), which makes it
   ``attn_core`` whatever its name (``budgets/classify.py`` is the first signal; docs/classes.md).
The result is the temp table ``kernel_ops`` (docs/schema.md; a view over ``gpu_ops`` where no host range is a cpu
op or a module: ``tracekit.analysis.unattributed``) and ``op_nodes`` (the host ranges as a tree).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import duckdb
import numpy as np
import polars as pl

from tracekit.analysis.nesting import nest
from tracekit.analysis.replay import register_replay_ops
from tracekit.analysis.replay_nodes import CAPTURE_PREFIX, copy_replayed, replayed_rows
from tracekit.analysis.unattributed import register_view, unattributable
from tracekit.budgets.classify import ClassRules, register_classes
from tracekit.floor.ops import ATTENTION_OPS, OpWork, op_work

#: module names (``nn.Module: Name_N``) and op names that are attention.
ATTENTION_MODULE_REGEX = re.compile(r"attention|attn|selfattn|mha\b|sdpa", re.IGNORECASE)
ATTENTION_OP_REGEX = re.compile(r"attention|attn|flash|sdpa|scaled_dot_product|sage", re.IGNORECASE)
PROJECTION_REGEX = re.compile(r"^(nn\.Module: (Linear|.*Linear)\b|aten::linear$)")
MODULE_PREFIX = "nn.Module: "


#: each distinct (op, recorded inputs) once, numbered in the order of its inputs (what picks one of an op's
#: duplicate rows below); its work (``WORK_COLUMNS``) is worked out once per row
_SIGNATURES_SQL = """
    SELECT ({first} + row_number() OVER (ORDER BY input_dims, input_types, input_strides, concrete_inputs, name)
            - 1)::BIGINT AS sig, *
    FROM (SELECT DISTINCT name, input_dims, input_types, input_strides, concrete_inputs FROM {prefix}op_shapes)
"""

#: the distinct (op, recorded inputs) of every traced op with its work, shared by the trace's nodes and a
#: capture trace's (their signatures are numbered apart); ``op_nodes`` rows hold only the signature, since
#: copying every op's inputs' text into the node table was most of its cost
WORK_TABLE = "_op_work"

_NODES_SQL = """
    WITH r AS (
        SELECT (row_number() OVER (ORDER BY rank, pid, tid, start_ns, end_ns DESC, kind, name) - 1)::BIGINT AS node,
               rank, pid, tid, start_ns, end_ns, name, kind AS source,
               dense_rank() OVER (ORDER BY rank, pid, tid) AS thread
        FROM {prefix}ranges
        WHERE end_ns IS NOT NULL AND tid IS NOT NULL AND (kind = 'op'
           OR (kind = 'python' AND starts_with(name, 'nn.Module: '))
           OR (kind = 'range' AND NOT regexp_matches(name, '^ProfilerStep#')))),
    -- each op's signature (a hash join on the inputs' text, then integers); int-us traces record ops of one
    -- thread with the same start: end and the smallest signature (the first inputs in order) make it one row
    s AS (SELECT o.rank, o.pid, o.tid, o.start_ns, o.end_ns, o.name, min(w.sig) AS sig
          FROM {prefix}op_shapes o JOIN {work} w ON w.sig >= {first} AND w.name = o.name
           AND w.input_dims IS NOT DISTINCT FROM o.input_dims
           AND w.input_types IS NOT DISTINCT FROM o.input_types
           AND w.input_strides IS NOT DISTINCT FROM o.input_strides
           AND w.concrete_inputs IS NOT DISTINCT FROM o.concrete_inputs
          GROUP BY ALL)
    SELECT r.*, s.sig
    FROM r LEFT JOIN s ON r.source = 'op' AND s.rank = r.rank AND s.pid = r.pid AND s.tid = r.tid
                      AND s.start_ns = r.start_ns AND s.end_ns = r.end_ns AND s.name = r.name
"""


def op_nodes(con: duckdb.DuckDBPyConnection, prefix: str = "", table: str = "_op_nodes") -> pl.DataFrame:
    """Host ranges that can own GPU work (cpu ops, ``nn.Module`` python functions, record_function ranges; not the
    step annotations) in (thread, start, longest first) order, with ``node`` (row), ``thread``, ``has_work`` and
    ``parent`` (row); the temp table ``table`` keeps them with each op's signature (``sig``) in ``WORK_TABLE``,
    where its recorded inputs and work (``WORK_COLUMNS``, worked out once per distinct op and inputs) are.
    ``prefix``: of the store's tables read (``capture_``: a graph-capture trace's)."""
    first = _next_signature(con)
    work = _with_work(con.sql(_SIGNATURES_SQL.format(prefix=prefix, first=first)).pl())
    _append_work(con, work)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS "
                + _NODES_SQL.format(prefix=prefix, work=WORK_TABLE, first=first))
    frame = con.sql("SELECT n.node, n.rank, n.pid, n.tid, n.thread, n.start_ns, n.end_ns, n.name, n.source, "
                    f"w.family IS NOT NULL AS has_work FROM {table} n LEFT JOIN {WORK_TABLE} w USING (sig) "
                    "ORDER BY n.node").pl()
    parent, _ = nest(frame["thread"].to_numpy(), frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy(),
                     np.zeros(0, np.int64), np.zeros(0, np.int64))
    return frame.with_columns(pl.Series("parent", parent))


def _next_signature(con: duckdb.DuckDBPyConnection) -> int:
    """The first signature number not yet in ``WORK_TABLE`` (0 when it does not exist yet)."""
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = ?",
                       [WORK_TABLE]).fetchall()[0][0]:
        return 0
    return con.execute(f"SELECT coalesce(max(sig) + 1, 0) FROM {WORK_TABLE}").fetchall()[0][0]


def _append_work(con: duckdb.DuckDBPyConnection, work: pl.DataFrame) -> None:
    """Add ``work`` (signatures with their inputs and work) to ``WORK_TABLE``, creating it the first time."""
    con.register("_new_work", work)
    try:
        con.execute(f"CREATE TEMP TABLE IF NOT EXISTS {WORK_TABLE} AS SELECT * FROM _new_work WHERE FALSE")
        con.execute(f"INSERT INTO {WORK_TABLE} SELECT * FROM _new_work")
    finally:
        con.unregister("_new_work")


def launching_nodes(con: duckdb.DuckDBPyConnection, nodes: pl.DataFrame) -> pl.DataFrame:
    """Every kernel and memory operation with its launch call and the innermost node (``node``, row of ``nodes``;
    -1: no host range was open, or the launch is not in the capture) open on that thread at the launch."""
    gpu = con.sql("""
        WITH l AS (SELECT rank, pid, correlation_id, arg_min(tid, start_ns) AS tid, min(start_ns) AS launch_ns
                   FROM launches GROUP BY rank, pid, correlation_id)
        SELECT g.rank, g.device_id, g.stream_id, g.start_ns, g.end_ns, g.dur_ns, g.name, g.is_memop,
               l.tid, coalesce(l.launch_ns, -1) AS launch_ns, g.pid
        FROM gpu_ops g LEFT JOIN l ON l.rank = g.rank AND l.pid = g.pid AND l.correlation_id = g.correlation_id
    """).pl()
    keys = nodes.select("rank", "pid", "tid", "thread").unique()
    gpu = gpu.join(keys, on=["rank", "pid", "tid"], how="left")
    thread = gpu["thread"].fill_null(-1).to_numpy()
    if len(nodes):
        _, inner = nest(nodes["thread"].to_numpy(), nodes["start_ns"].to_numpy(), nodes["end_ns"].to_numpy(),
                        thread, gpu["launch_ns"].to_numpy())
    else:
        inner = np.full(len(gpu), -1, dtype=np.int64)
    inner[thread < 0] = -1
    return gpu.drop("thread").with_columns(pl.Series("node", inner))


@lru_cache(maxsize=65536)
def _work(name: str, dims: str, types: str | None, strides: str | None, concrete: str | None) -> OpWork | None:
    def load(text: str | None) -> list | None:
        try:
            value = json.loads(text) if text else None
        except ValueError:
            return None
        return value if isinstance(value, list) else None

    return op_work(name, load(dims) or [], load(types), load(strides), load(concrete))


WORK_COLUMNS = ("family", "flops", "hbm_bytes", "precision", "detail")  # op_nodes' columns of each op's work


def node_work(nodes: pl.DataFrame) -> list[OpWork | None]:
    """The work model of each node (None: a module, an op without recorded inputs or without a model); read from
    the work columns when ``nodes`` is the ``op_nodes`` table, else computed from the recorded inputs."""
    if "family" in nodes.columns:
        cols = [nodes[c].to_list() for c in WORK_COLUMNS]
        return [OpWork(f, fl, hb, p, d) if f is not None else None for f, fl, hb, p, d in zip(*cols, strict=True)]
    cols = [nodes[c].to_list() for c in ("name", "input_dims", "input_types", "input_strides", "concrete_inputs")]
    return [_work(n, d, t, s, c) if d else None for n, d, t, s, c in zip(*cols, strict=True)]


_INPUTS = ("name", "input_dims", "input_types", "input_strides", "concrete_inputs")


def _with_work(nodes: pl.DataFrame) -> pl.DataFrame:
    """``nodes`` (distinct ops with their recorded inputs) with the work columns (``WORK_COLUMNS``)."""
    work = node_work(nodes)
    return nodes.with_columns(
        pl.Series("family", [w.family if w else None for w in work], dtype=pl.String),
        pl.Series("flops", [w.flops if w else None for w in work], dtype=pl.Float64),
        pl.Series("hbm_bytes", [w.hbm_bytes if w else None for w in work], dtype=pl.Float64),
        pl.Series("precision", [w.precision if w else None for w in work], dtype=pl.String),
        pl.Series("detail", [w.detail if w else None for w in work], dtype=pl.String))


@lru_cache(maxsize=4096)
def _name_flags(name: str, source: str) -> tuple[bool, bool, bool]:
    """(an attention op, an attention module, a projection) by a node's name."""
    attn_op = source == "op" and (name in ATTENTION_OPS or bool(ATTENTION_OP_REGEX.search(name)))
    attn_module = source == "python" and bool(ATTENTION_MODULE_REGEX.search(name.removeprefix(MODULE_PREFIX)))
    return attn_op, attn_module, bool(PROJECTION_REGEX.search(name))


def _flags(nodes: pl.DataFrame) -> np.ndarray:
    """``_name_flags`` of every node (n x 3), worked out once per distinct name and source."""
    keys = nodes.select("name", "source")
    distinct = keys.unique()
    flags = np.array([_name_flags(a, b) for a, b in distinct.iter_rows()], dtype=bool).reshape(len(distinct), 3)
    code = keys.join(distinct.with_row_index("_code"), on=["name", "source"], how="left", nulls_equal=True,
                     maintain_order="left")["_code"].to_numpy()
    return flags[code]


def node_chains(nodes: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node: its unit (the outermost cpu op with a work model on its chain, else the innermost cpu op; -1
    none), its innermost module (itself for a module) and whether it is attention (under an attention op, or
    under an attention module with no projection between: the nearer of the two decides). Computed from the
    roots down, one depth level at a time."""
    n = len(nodes)
    parent = nodes["parent"].to_numpy().astype(np.int64)
    is_op, is_module = ((nodes["source"] == k).fill_null(False).to_numpy() for k in ("op", "python"))
    has_work = (nodes["has_work"].to_numpy() if "has_work" in nodes.columns
                else nodes["family"].is_not_null().to_numpy() if "family" in nodes.columns
                else np.array([w is not None for w in node_work(nodes)], dtype=bool))
    flags = _flags(nodes)
    depth = np.zeros(n, dtype=np.int64)
    up = parent.copy()
    while (live := up >= 0).any():
        depth[live] += 1
        up[live] = parent[up[live]]
    outer, inner_op, module = (np.full(n, -1, dtype=np.int64) for _ in range(3))
    attn_op, attn_mod = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    index = np.arange(n)
    for d in range(int(depth.max()) + 1 if n else 0):
        i = index[depth == d]
        if d:
            p = parent[i]
            outer[i], inner_op[i], module[i], attn_op[i], attn_mod[i] = (
                outer[p], inner_op[p], module[p], attn_op[p], attn_mod[p])
        inner_op[i] = np.where(is_op[i], i, inner_op[i])
        outer[i] = np.where((outer[i] < 0) & is_op[i] & has_work[i], i, outer[i])
        module[i] = np.where(is_module[i], i, module[i])
        attn_op[i] |= flags[i, 0]
        attn_mod[i] = np.where(flags[i, 2], False, np.where(flags[i, 1], True, attn_mod[i]))
    return np.where(outer >= 0, outer, inner_op), module, attn_op | attn_mod


def attribute(nodes: pl.DataFrame, gpu: pl.DataFrame, base_class: dict[str, str],
              chains: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
              keep: frozenset[str] = frozenset()) -> pl.DataFrame:
    """``gpu`` (from ``launching_nodes`` or any kernel -> node mapping, column ``node``) with its unit, module and
    class: ``unit`` (node row owning the time, -1 none), ``module`` (innermost ``nn.Module`` node, -1 none),
    ``attention`` (bool) and ``class`` (the name's class, attn_core for attention unless the name's class is
    in ``keep``: a collective launched inside an attention module stays communication)."""
    unit, module, attention = chains if chains is not None else node_chains(nodes)
    node = gpu["node"].to_numpy()
    has = node >= 0
    at = np.where(has, node, 0)

    def pick(values: np.ndarray, missing: object, dtype: type) -> np.ndarray:
        arr = values.astype(dtype) if len(values) else np.asarray([missing], dtype=dtype)
        return np.where(has, arr[at], missing)

    attn = pl.Series("attention", pick(attention, False, bool), pl.Boolean)
    name = pl.col("name")
    base = (pl.when(name.is_null()).then(pl.lit("other"))
            .otherwise(name.replace_strict(base_class, default="other", return_dtype=pl.String)))
    cls = (pl.when(pl.col("is_memop")).then(name)
           .when(pl.col("attention") & ~base.is_in(list(keep))).then(pl.lit("attn_core")).otherwise(base)
           .alias("class"))
    return gpu.with_columns(pl.Series("unit", pick(unit, -1, np.int64), pl.Int64),
                            pl.Series("module", pick(module, -1, np.int64), pl.Int64), attn).with_columns(cls)


def register_attribution(con: duckdb.DuckDBPyConnection, rules: ClassRules) -> None:
    """Create the temp tables ``op_nodes`` (the host ranges, ``node`` = row, with each op's work) and ``kernel_ops``
    (every GPU operation with its launching node, unit, module, attention flag and class); once per connection.
    Where no host range is a cpu op or a module and no replayed graph is fed a capture's, ``kernel_ops`` is a
    view of the same rows over ``gpu_ops`` (``tracekit.analysis.unattributed``), not a per-kernel copy."""
    if has_attribution(con):
        return
    register_classes(con, rules)
    nodes = op_nodes(con)
    register_replay_ops(con)
    replays = replayed_rows(con)
    if replays.is_empty() and unattributable(nodes):
        _register_links(con, nodes, node_chains(nodes))
        register_view(con, nodes)
        return
    base = dict(con.execute("SELECT name, class FROM kernel_class").fetchall())
    nodes, gpu = with_replays(con, nodes, launching_nodes(con, nodes), replays)
    chains = node_chains(nodes)
    ops = attribute(nodes, gpu, base, chains, frozenset(rules.communication))
    _register_links(con, nodes, chains)
    # names and classes as categories: DuckDB then copies each distinct string once, not once per kernel
    ops = ops.with_columns(pl.col("name", "class").cast(pl.Categorical))  # noqa: F841 - read by DuckDB below
    con.execute("CREATE TEMP TABLE kernel_ops AS SELECT * FROM ops")


def has_attribution(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``register_attribution`` has run on this connection (``kernel_ops``: a table, or a view)."""
    return bool(con.execute("""
        SELECT (SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = 'kernel_ops')
             + (SELECT count(*) FROM duckdb_views() WHERE temporary AND view_name = 'kernel_ops')
    """).fetchall()[0][0])


def _register_links(con: duckdb.DuckDBPyConnection, nodes: pl.DataFrame,
                    chains: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """The ``op_nodes`` view: ``_op_nodes`` with each op's work and each node's parent and modules."""
    module = chains[1]
    parent = nodes["parent"].to_numpy()
    module_parent = np.where(parent >= 0, module[np.maximum(parent, 0)], -1)
    links = pl.DataFrame({"node": nodes["node"], "parent": nodes["parent"],  # noqa: F841 - read by DuckDB below
                          "module_of": pl.Series(module, dtype=pl.Int64),
                          "module_parent": pl.Series(module_parent, dtype=pl.Int64)})
    # a view, not a copy of every node's text: readers select a few columns of it
    con.execute("CREATE TEMP TABLE _op_links AS SELECT * FROM links")
    con.execute("CREATE TEMP VIEW op_nodes AS SELECT n.* EXCLUDE (thread, sig), w.* EXCLUDE (sig, name), l.parent, "
                f"l.module_of, l.module_parent FROM _op_nodes n LEFT JOIN {WORK_TABLE} w USING (sig) "
                "JOIN _op_links l USING (node)")


def with_replays(con: duckdb.DuckDBPyConnection, nodes: pl.DataFrame, gpu: pl.DataFrame,
                 rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``nodes`` and ``gpu`` (``launching_nodes``) with replayed graph kernels fed the capture's ops: each graph
    launch's capture nodes copied, each replayed kernel's node its copy (``tracekit.analysis.replay_nodes``).
    ``rows``: ``replayed_rows`` (after ``register_replay_ops``)."""
    if rows.is_empty():
        return nodes, gpu
    capture = op_nodes(con, CAPTURE_PREFIX, "_capture_nodes")
    keys = capture.select("rank", "pid", "tid", "thread").unique()
    rows = rows.with_columns(pl.col("rank").cast(keys["rank"].dtype), pl.col("capture_pid").cast(keys["pid"].dtype),
                             pl.col("capture_tid").cast(keys["tid"].dtype))
    thread = rows.join(keys, left_on=["rank", "capture_pid", "capture_tid"], right_on=["rank", "pid", "tid"],
                       how="left", maintain_order="left")["thread"].fill_null(-1).to_numpy()
    _, inner = nest(capture["thread"].to_numpy(), capture["start_ns"].to_numpy(), capture["end_ns"].to_numpy(),
                    thread, rows["capture_launch_ns"].to_numpy())
    inner[thread < 0] = -1
    try:
        return copy_replayed(con, nodes, gpu, capture, rows, inner)
    finally:
        con.execute("DROP TABLE _capture_nodes")


def load_modules(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The module nodes of ``op_nodes`` (``node, name, module_parent``: the nearest module above), in row order."""
    return con.sql("SELECT node, name, module_parent FROM op_nodes WHERE source = 'python' ORDER BY node").pl()

