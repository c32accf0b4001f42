"""Per-operation detail behind a few analysed steps, re-read from the store when a picture needs it.

The analysis keeps only step summaries (``tracekit.analysis.device``). Timelines, the HTML report and
the Perfetto export draw operations, gaps by cause and exposed communication; they get them here: one
step's operations and host activity (the median step, the slowest rank's), or a whole device (the Perfetto
export writes every operation). The accounts are recomputed on what was read, so they equal the summaries.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from tracekit.analysis.accounting import StepAccount, account_step
from tracekit.analysis.device import DeviceAnalysis
from tracekit.analysis.gaps import HostActivity
from tracekit.analysis.ops import DeviceOps, Vocabulary, is_prepared, load_ops, prepare
from tracekit.budgets.classify import load_rules


@dataclass
class Detail:
    """Operations and host activity of one device over some steps, with those steps' full accounts
    (``gaps`` and ``ops_in_window``, indices into ``ops``)."""

    ops: DeviceOps
    host: HostActivity
    accounts: list[StepAccount]


class DetailReader:
    """Reads step detail from a store's connection (preparing it first when the analysis ran elsewhere)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, marker: str) -> None:
        rules = load_rules()
        if not is_prepared(con):
            prepare(con, rules)
        self.con, self.marker, self.communication = con, marker, rules.communication
        self.vocab = Vocabulary.load(con)

    def step(self, dev: DeviceAnalysis, acc: StepAccount) -> tuple[Detail, StepAccount]:
        """One step's operations (those overlapping it and the next start after it) and host activity."""
        w = acc.window
        ops = load_ops(self.con, self.vocab, dev.rank, dev.device_id, w.start_ns, w.end_ns)
        host = HostActivity.load(self.con, dev.rank, self.marker, w.start_ns, w.end_ns)
        full = account_step(ops, w, self.communication)
        return Detail(ops, host, [full]), full

    def device(self, dev: DeviceAnalysis) -> Detail:
        """All of one device's operations and its rank's host activity, with every analysed step."""
        ops = load_ops(self.con, self.vocab, dev.rank, dev.device_id)
        host = HostActivity.load(self.con, dev.rank, self.marker)
        return Detail(ops, host, [account_step(ops, a.window, self.communication) for a in dev.accounts])
