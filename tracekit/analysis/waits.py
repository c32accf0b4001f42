"""Waits on work outside the trace: blocking host calls whose duration the trace's GPU activity cannot explain.

A synchronising call (a stream/device/event synchronize, a blocking copy) returns when the GPU work it
waits for has finished, so while it blocks that work runs on the GPU. When the device holds no operation
for most of the call, the work it waited for is not in the trace: launched before the capture began (a
serving engine's profiler endpoint starts mid-run), on another process or device, or dropped by the
profiler. That idle time measures nothing of the step, so it is left out of the step window (and said:
which call, where, how long) and the GPU-bound rest is judged.

The same holds without a blocking call for the device's first operation: launched, its call returned, and
the device sat idle with nothing of the trace before it: it waited on work launched before the capture
began (the stream was still busy with it). Later in the capture such an idle stretch is a ``dependency``
gap (an event of another stream, device or rank), which the gap causes report.

The rule, two forms: (1) a blocking call of the rank lasting at least ``MIN_WAIT_NS`` during which one
device-idle stretch covers at least ``UNEXPLAINED_SHARE`` of it: the wait is that idle stretch, clipped to
the call; (2) the idle stretch before the device's first operation, after that operation's launch call
returned: the wait is the idle time after that return, when at least ``MIN_WAIT_NS``.
Device idle is found in SQL (each operation against the running latest end before it), so only the long
idle stretches, and the few long calls, ever reach Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from tracekit.analysis.ops import SYNC_API_REGEX

MIN_WAIT_NS = 1_000_000  # shorter blocking calls are ordinary end-of-step syncs, whatever the device did
UNEXPLAINED_SHARE = 0.5  # the device idles for at least this share of the call: the work is not in the trace


@dataclass(frozen=True)
class OutsideWait:
    """One blocking call waiting on work the trace does not hold: the idle part [start_ns, end_ns) is left
    out of its step; ``call_dur_ns`` is the whole call."""

    rank: int
    device_id: int
    api_call: str  # the blocking call, or the launch call of the operation that waited
    call_start_ns: int
    call_dur_ns: int
    start_ns: int
    end_ns: int
    kind: str = "blocking_call"  # or 'launched_waiting': an operation launched, its device idle

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns


_IDLE_SQL = """
    WITH o AS (SELECT start_ns, end_ns, pid, correlation_id FROM gpu_ops WHERE rank = $rank AND {devices}),
         run AS (SELECT start_ns, pid, correlation_id,
                        max(end_ns) OVER (ORDER BY start_ns, end_ns
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev
                 FROM o),
         -- before the device's first operation it idles since the capture began
         idle AS (SELECT coalesce(prev, $never) AS lo, start_ns AS hi, pid, correlation_id FROM run
                  WHERE prev IS NULL OR start_ns - prev >= $min)
"""


def outside_waits(con: duckdb.DuckDBPyConnection, rank: int, device_id: int) -> list[OutsideWait]:
    """The waits on outside work of one device, by start (none overlap: one idle stretch each)."""
    params = {"rank": rank, "device": device_id, "min": MIN_WAIT_NS, "never": -(2**62), "sync": SYNC_API_REGEX,
              "share": UNEXPLAINED_SHARE}
    # A blocking call is explained by GPU work on any device of the rank (a process drives several GPUs). The
    # device-idle stretches (a window over every operation of the rank) are looked for only if such a call is.
    calls = """SELECT name, start_ns, end_ns, dur_ns FROM launches
               WHERE rank = $rank AND dur_ns >= $min AND regexp_matches(name, $sync)"""
    blocking = []
    if con.execute(f"SELECT EXISTS ({calls})", {k: params[k] for k in ("rank", "min", "sync")}).fetchall()[0][0]:
        blocking = con.execute(_IDLE_SQL.format(devices="TRUE") + f""",
             calls AS ({calls})
            SELECT c.name, c.start_ns, c.dur_ns, greatest(c.start_ns, i.lo) AS s, least(c.end_ns, i.hi) AS e
            FROM calls c JOIN idle i ON i.lo < c.end_ns AND i.hi > c.start_ns
            WHERE least(c.end_ns, i.hi) - greatest(c.start_ns, i.lo) >= $share * c.dur_ns
        """, {k: v for k, v in params.items() if k != "device"}).fetchall()
    launched = con.execute(_IDLE_SQL.format(devices="device_id = $device") + """
        SELECT any_value(l.name), min(l.start_ns), any_value(l.dur_ns), greatest(i.lo, min(l.end_ns)) AS s, i.hi
        FROM idle i JOIN launches l ON l.rank = $rank AND l.pid = i.pid AND l.correlation_id = i.correlation_id
        WHERE i.lo = $never GROUP BY i.lo, i.hi HAVING i.hi - greatest(i.lo, min(l.end_ns)) >= $min
    """, {k: params[k] for k in ("rank", "device", "min", "never")}).fetchall()
    # A blocking call names the wait better than the operation queued behind it: over one idle stretch the
    # call is kept, the other finding dropped; each idle stretch is left out once.
    kept: list[OutsideWait] = []
    for rows, kind in ((blocking, "blocking_call"), (launched, "launched_waiting")):
        for name, call_start, call_dur, s, e in sorted(rows, key=lambda r: (r[3], r[4], r[1], r[0])):
            if any(s < w.end_ns and e > w.start_ns for w in kept):
                continue
            kept.append(OutsideWait(rank, device_id, str(name), int(call_start), int(call_dur), int(s), int(e), kind))
    return sorted(kept, key=lambda w: (w.start_ns, w.end_ns))




def _step_waits(results: Sequence[Any]) -> list[tuple[Any, Any, OutsideWait]]:
    """(device result, its step, the wait) for every wait left out of an analysed step."""
    out = []
    for res in results:
        for acc in res.accounts:
            for s, e in acc.window.excluded:
                out.append((res, acc, OutsideWait(res.rank, res.device_id, *_call(res, s), s, e)))
    return out


def _call(res: Any, start_ns: int) -> tuple[str, int, int]:
    w = next((w for w in res.source.waits if w.start_ns <= start_ns < w.end_ns), None)
    return (w.api_call, w.call_start_ns, w.call_dur_ns) if w else ("", start_ns, 0)


def waits_section(results: Sequence[Any]) -> list[dict[str, Any]]:
    """The report's ``steps.outside_waits``: each wait left out of a step, where and how long."""
    out = []
    for res, acc, w in _step_waits(results):
        kind = next((x.kind for x in res.source.waits if x.start_ns <= w.start_ns < x.end_ns), "blocking_call")
        out.append({"rank": w.rank, "device": w.device_id, "step": acc.window.label, "kind": kind,
                    "api_call": w.api_call, "start_ns": w.start_ns, "step_offset_ns": w.start_ns - acc.window.start_ns,
                    "dur_ns": w.dur_ns, "call_dur_ns": w.call_dur_ns})
    return out

