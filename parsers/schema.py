"""The trace store's tables: the contract every reader writes and every analysis reads.

One DuckDB database per input file. Times are int64 nanoseconds on the capture's own timeline;
units are in column names. Every event table has a ``rank`` column so that the stores of many files
(one per rank) can be read as one (see ``tracekit.store.ingest``). Documented in ``docs/schema.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb  # annotations only: the schema's names load without DuckDB


def quiet(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """``con`` with DuckDB's progress bar off (its cursors inherit it): DuckDB draws one on standard output for
    a query over 2 s, even into a pipe or a file, which would corrupt ``--format json > report.json``. A
    connection setting, not a database one, so every connection tracekit opens goes through here."""
    con.execute("SET enable_progress_bar = false")
    return con


STORE_SCHEMA_VERSION = 8  # 3: nsys exports store one rank per GPU process; op_shapes. 4: collectives. 5: capture,
# ranges.kind. 6: launch_kernels, graph_nodes, kernels.annotation (and graph_node_id from Kineto). 7: op_shapes
# for every cpu op with recorded shapes (end, types, strides, concrete inputs). 8: kernels.op_category

# Names the whole tool agrees on (readers, store views and analyses import them from here).
PROFILER_STEP_REGEX = r"^ProfilerStep#(\d+)\n?$"  # torch.profiler's step annotation; group 1 is the step number
# attention cpu ops, whose recorded shapes state batch and sequence lengths (readers keep them in op_shapes;
# the missing-shapes caveat counts them)
ATTENTION_OP_REGEX = r"(?i)attention|attn|flash|sdpa|scaled_dot_product"
GRAPH_LAUNCH_APIS = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")  # without a _vNNNN version suffix

TABLES: dict[str, str] = {
    # One row per input file.
    "trace_info": """
        rank INTEGER, source_path VARCHAR, source_format VARCHAR, format_version VARCHAR,
        product_version VARCHAR, capture_command VARCHAR, start_ns BIGINT, end_ns BIGINT
    """,
    # Free-form key/value metadata copied from the input (export metadata, distributedInfo, ...), for `info`
    # and people: no analysis reads it (the facts an analysis needs are in ``capture``, in one form).
    "trace_meta": "rank INTEGER, key VARCHAR, value VARCHAR",
    # What the capture says of itself, format-neutral: one row per rank a file holds (``write_capture``).
    # world_size: as the job recorded it; host: the recording host's name; wall_clock_base_ns: the Unix-epoch
    # time of the timeline's zero (wall clock = base + t), NULL when unknown; start_trigger / start_delay_ns:
    # how the capture was started when not with the process ('Immediate' or NULL: with it); rank_source:
    # 'recorded' (the file names its ranks), 'process_order' (numbered by the reader), NULL (none named).
    "capture": """
        rank INTEGER, world_size INTEGER, host VARCHAR, wall_clock_base_ns BIGINT, start_trigger VARCHAR,
        start_delay_ns BIGINT, rank_source VARCHAR
    """,
    # What the reader could not read or chose to skip: one row per kind of problem.
    "read_notes": "rank INTEGER, kind VARCHAR, count BIGINT, detail VARCHAR",
    "devices": """
        rank INTEGER, device_id INTEGER, name VARCHAR, sm_count INTEGER, memory_bytes BIGINT,
        mem_bw_bytes_per_s DOUBLE, compute_major INTEGER, compute_minor INTEGER, vendor VARCHAR
    """,
    "processes": "rank INTEGER, pid BIGINT, name VARCHAR",
    "threads": "rank INTEGER, pid BIGINT, tid BIGINT, name VARCHAR",
    # GPU kernels. (rank, pid, correlation_id) joins a kernel to its launch in api_calls. annotation: a graph
    # node's annotation where the trace carries one (PyTorch cuda_graph_annotations: the module's module_fqn).
    # op_category: what the trace says the kernel computes, where it says (OP_CATEGORIES; XLA: its HLO op's),
    # a classification signal beside the name.
    "kernels": """
        rank INTEGER, pid BIGINT, device_id INTEGER, stream_id BIGINT, start_ns BIGINT, end_ns BIGINT,
        dur_ns BIGINT, name VARCHAR, short_name VARCHAR, correlation_id BIGINT,
        grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER, block_z INTEGER,
        graph_id BIGINT, graph_node_id BIGINT, annotation VARCHAR, op_category VARCHAR
    """,
    # memcpy and memset on the GPU. kind: 'memcpy' | 'memset'; copy_kind: 'HtoD', 'DtoH', 'DtoD', ...
    "memops": """
        rank INTEGER, pid BIGINT, device_id INTEGER, stream_id BIGINT, start_ns BIGINT, end_ns BIGINT,
        dur_ns BIGINT, kind VARCHAR, copy_kind VARCHAR, bytes BIGINT, correlation_id BIGINT,
        graph_node_id BIGINT
    """,
    # Host API calls (CUDA/HIP runtime and driver). api: 'runtime' | 'driver'.
    # name is the display name (nsys strips a 4-character _vNNNN suffix); raw_name as recorded.
    # is_duplicate marks backtrace duplicate rows of old nsys exports: kept for nsys-compatible sums,
    # excluded from every analysis.
    "api_calls": """
        rank INTEGER, pid BIGINT, tid BIGINT, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,
        name VARCHAR, raw_name VARCHAR, api VARCHAR, correlation_id BIGINT, is_duplicate BOOLEAN
    """,
    # Host-side ranges: NVTX push/pop and start/end ranges, Kineto user annotations and cpu ops.
    # source: what the format calls it ('nvtx' | 'user_annotation' | 'gpu_user_annotation' | 'cpu_op' |
    # 'python_function' | ...); kind: what it is, whatever the format (RANGE_KINDS), the column analyses read.
    # style: 'PushPop' | 'StartEnd'. end_ns is NULL for a range that never ended.
    # device_id/stream_id are set for GPU-side annotations only.
    "ranges": """
        rank INTEGER, pid BIGINT, tid BIGINT, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,
        name VARCHAR, domain VARCHAR, source VARCHAR, style VARCHAR, end_tid BIGINT,
        device_id INTEGER, stream_id BIGINT, kind VARCHAR
    """,
    # The kernel a launch call names (Kineto ``args.kernel``: HIP traces name it on every launch, and a launch
    # captured into a graph has no kernel of its own to join): what maps graph replays to their capture.
    "launch_kernels": "rank INTEGER, pid BIGINT, correlation_id BIGINT, kernel VARCHAR",
    # CUDA graph node records (nsys CUDA_GRAPH_NODE_EVENTS, --cuda-graph-trace=node): a node created on thread
    # (pid, tid) at start_ns (in stream capture: inside the captured launch call), or cloned from
    # original_graph_node_id (instantiation). A replayed kernel's graph_node_id is such a node.
    "graph_nodes": "rank INTEGER, pid BIGINT, tid BIGINT, start_ns BIGINT, graph_node_id BIGINT, "
                   "original_graph_node_id BIGINT",
    # Recorded inputs of every cpu op that has them (Kineto ``record_shapes``): ``Input Dims``, ``Input type``,
    # ``Input Strides`` and ``Concrete Inputs``, each as compact JSON text. The op floor reads them
    # (tracekit.analysis.opfloor), and attention ops' shapes give batch and lengths (tracekit.analysis.fit).
    "op_shapes": """
        rank INTEGER, pid BIGINT, tid BIGINT, start_ns BIGINT, end_ns BIGINT, name VARCHAR, input_dims VARCHAR,
        input_types VARCHAR, input_strides VARCHAR, concrete_inputs VARCHAR
    """,
    # Collective metadata PyTorch records (Kineto): on an NCCL kernel (source 'kernel': device_id, stream_id,
    # start_ns and correlation_id name the kernel) or on the host op ``record_param_comms`` (source
    # 'record_param_comms': pid, tid, start_ns, end_ns name the op; kernels launched inside it are its).
    # group_ranks is the text PyTorch writes ('[0, 1]'); seq is the process group's collective sequence number.
    "collectives": """
        rank INTEGER, source VARCHAR, pid BIGINT, tid BIGINT, device_id INTEGER, stream_id BIGINT,
        start_ns BIGINT, end_ns BIGINT, correlation_id BIGINT, collective VARCHAR, group_name VARCHAR,
        group_desc VARCHAR, group_ranks VARCHAR, group_size INTEGER, seq BIGINT, in_nelems BIGINT,
        out_nelems BIGINT, dtype VARCHAR
    """,
}

EVENT_TABLES = ("kernels", "memops", "api_calls", "ranges")
# ranges.kind: a user range (NVTX/roctx push-pop or start-end, torch record_function), a GPU-side annotation, a
# framework op (a PyTorch cpu op, an XLA op), a Python function.
RANGE_KINDS = ("range", "gpu_range", "op", "python")
# kernels.op_category: what a kernel computes, as a reader can tell from the trace's own record of the op it runs.
OP_CATEGORIES = ("matmul", "convolution", "elementwise", "reduction", "data_movement", "allreduce", "allgather",
                 "reducescatter", "alltoall", "sendrecv", "broadcast")
# read_notes kind of a capture without GPU activity (its detail: why, and what to capture instead). Such a
# file is stored, so `info` describes it; the analysis refuses it with that detail.
NO_GPU_ACTIVITY = "no_gpu_activity"


def create_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Create every store table, empty, in ``con``."""
    for name, columns in TABLES.items():
        con.execute(f"CREATE TABLE {name} ({columns})")


def write_capture(con: duckdb.DuckDBPyConnection, rank: int | None, *, world_size: int | None = None,
                  host: str | None = None, wall_clock_base_ns: int | None = None, start_trigger: str | None = None,
                  start_delay_ns: int | None = None, rank_source: str | None = None) -> None:
    """The ``capture`` row of one rank of the file (a reader calls it once per rank it writes)."""
    con.execute("INSERT INTO capture VALUES (?, ?, ?, ?, ?, ?, ?)",
                [rank, world_size, host or None, wall_clock_base_ns, start_trigger or None, start_delay_ns,
                 rank_source])

