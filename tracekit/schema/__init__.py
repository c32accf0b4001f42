"""The documents' contracts: msgspec Structs of the report (report.py), the diff (diff.py), reconcile (reconcile.py)
and info (info.py) documents, the verdict enumeration (verdict.py), and docs/report-schema.md read as data (docs.py),
for the MCP server's explain tool and tests/test_report_schema.py."""
