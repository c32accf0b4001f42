"""The trace store: ingest into cached DuckDB files, their checks, the input set, summaries and export."""
