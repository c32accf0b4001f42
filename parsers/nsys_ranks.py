"""Ranks of an Nsight Systems export: one per process that ran GPU work.

One ``nsys profile`` often covers a whole job (``nsys profile torchrun --nproc_per_node=2 ...``): each GPU
process is then a rank. The exports seen record no NCCL/torch rank per process (NCCL's NVTX payloads that
carry it are absent from them), so several processes are numbered by each one's lowest CUDA device, then
pid, after torchrun's LOCAL_RANK = device convention. An export of one process (``nsys profile`` run inside
each rank) takes the rank its recorded environment holds (``nsys_meta.RANK_VARIABLES``). Rows of processes
without GPU work (the launcher) keep rank NULL and belong to the file's first rank in the store.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

RANKED_TABLES = ("kernels", "memops", "api_calls", "ranges", "threads", "processes", "graph_nodes", "op_shapes")


def assign_process_ranks(con: duckdb.DuckDBPyConnection, recorded_rank: int | None
                         ) -> tuple[dict[int, int], str | None, tuple[str, int, str] | None]:
    """Set the ``rank`` of every row of a GPU process (and of the devices they ran on) in the store of one
    export. Returns (pid -> rank, how: 'recorded' | 'process_order' | None, a read note or None); no ranks
    when the file is one process that names none (the store assigns its rank)."""
    gpu = con.execute("""
        SELECT pid, min(device_id) FROM (SELECT pid, device_id FROM kernels UNION ALL
                                         SELECT pid, device_id FROM memops)
        WHERE pid IS NOT NULL GROUP BY pid ORDER BY 2, 1""").fetchall()
    note = None
    if len(gpu) == 1 and recorded_rank is not None:
        ranks, source = {gpu[0][0]: recorded_rank}, "recorded"
    elif len(gpu) > 1:
        ranks, source = {pid: i for i, (pid, _) in enumerate(gpu)}, "process_order"
        note = ("ranks_from_processes", len(gpu),
                "one rank per GPU process, numbered by lowest CUDA device (the export records no rank): "
                + ", ".join(f"pid {pid} (GPU {dev}) -> {i}" for i, (pid, dev) in enumerate(gpu)))
    else:
        return {}, None, None
    mapping = pa.table({"pid": list(ranks), "rank": list(ranks.values())},
                       schema=pa.schema([("pid", pa.int64()), ("rank", pa.int32())]))
    con.register("_nsys_ranks", mapping)
    try:
        for table in RANKED_TABLES:
            con.execute(f"UPDATE {table} t SET rank = m.rank FROM _nsys_ranks m WHERE t.pid = m.pid").fetchall()
        con.execute("""UPDATE devices d SET rank = m.rank FROM
                           (SELECT device_id, min(pid) AS pid FROM kernels GROUP BY device_id) k, _nsys_ranks m
                       WHERE d.device_id = k.device_id AND k.pid = m.pid""").fetchall()
    finally:
        con.unregister("_nsys_ranks")
    return ranks, source, note
