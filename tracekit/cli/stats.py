"""`tracekit api`, `nvtx` and `memory`: the per-name summaries of ``nsys stats`` (cudaapisum, nvtxsum,
gpumemtimesum, gpumemsizesum), read from the store with the shared input and output options."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracekit.cli.common import COUNT, input_options, output_options

if TYPE_CHECKING:
    import polars as pl

    from tracekit.store.ingest import Store

_LIMIT = click.option("--limit", type=COUNT, default=0, help="Show only the top N rows (0: all).")


def _emit(store: Store, title: str, table: str, frame: pl.DataFrame, limit: int, fmt: str, out_path: Path | None,
          note: str | None = None) -> None:
    from tracekit.report.document import Document, Table
    from tracekit.report.render import emit

    emit(Document(title, [Table(table, frame.head(limit) if limit else frame, note=note)], notes=store.warnings),
         fmt, out_path)


@click.command("api")
@input_options
@output_options
@click.option("--nsys-2022", "nsys_2022", is_flag=True,
              help="Count backtrace duplicate rows as their own rows, grouped by recorded name, as nsys 2022.4's "
                   "cudaapisum did.")
@_LIMIT
def api_cmd(store: Store, fmt: str, out_path: Path | None, nsys_2022: bool, limit: int) -> None:
    """CUDA/HIP API calls per name: calls, total, average, median, min, max, stddev, share (nsys cuda_api_sum)."""
    from tracekit.store import summaries

    _emit(store, "tracekit api", "API calls by name", summaries.api_summary(store.con, nsys_compat=nsys_2022),
          limit, fmt, out_path)


@click.command("nvtx")
@input_options
@output_options
@_LIMIT
def nvtx_cmd(store: Store, fmt: str, out_path: Path | None, limit: int) -> None:
    """NVTX ranges per name and style: instances, total, average, median, min, max, stddev (nsys nvtx_sum)."""
    from tracekit.store import summaries

    _emit(store, "tracekit nvtx", "NVTX ranges by name", summaries.nvtx_summary(store.con), limit, fmt, out_path,
          note="nested ranges are not made exclusive; a range that never ended lasts to the rank's last NVTX time")


@click.command("memory")
@input_options
@output_options
@click.option("--by", "by", type=click.Choice(["time", "size"]), default="time", show_default=True,
              help="GPU time per operation (nsys cuda_gpu_mem_time_sum) or bytes (cuda_gpu_mem_size_sum).")
@_LIMIT
def memory_cmd(store: Store, fmt: str, out_path: Path | None, by: str, limit: int) -> None:
    """GPU memory copies and sets per operation kind, by time or by size."""
    from tracekit.store import summaries

    frame = summaries.memop_time_summary(store.con) if by == "time" else summaries.memop_size_summary(store.con)
    _emit(store, "tracekit memory", f"memory operations by {by}", frame, limit, fmt, out_path)
