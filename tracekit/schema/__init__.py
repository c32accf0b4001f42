"""The documents' contracts: docs/report-schema.md read as data (docs.py), for the MCP server's explain tool and
tests/test_report_schema.py."""
