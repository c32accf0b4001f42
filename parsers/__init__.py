"""Readers: one per input format. Each writes one input file into the store's tables.

A reader is a function ``read(path, con) -> None``: ``con`` is a DuckDB connection in which
``schema.create_tables`` has already made every store table, empty. The reader inserts the file's
events with ``rank`` set to the rank the file itself names (NULL when it names none), one
``trace_info`` row and its ``capture`` facts (``schema.write_capture``), and the ``kind`` of every range. It
raises ``tracekit.errors.InputError`` (one line naming the file) on input it cannot read, and records what it
skipped in ``read_notes``. Readers know nothing of the floor model. Each is declared once in
``tracekit.parsers.registry``, which detects the format of a file.
"""
