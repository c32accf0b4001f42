"""rocprofv3 commands for AMD kernels: the counterpart of the ncu commands (``tracekit.analysis.ncu``).

rocprofv3 (ROCm's rocprofiler-sdk) selects what it profiles with two filters, which apply to counter
collection (``--pmc``) and thread trace, not to plain tracing (rocprofiler-sdk ``source/bin/rocprofv3.py`` and
``source/lib/rocprofiler-sdk-tool``):
- ``--kernel-include-regex RE``: ``std::regex_search`` (ECMAScript) over the kernel's formatted name, which is
  the demangled symbol by default (``.kd`` suffix dropped) and the raw symbol with ``--mangled-kernels``. A
  name the trace records mangled (``_Z...``, as Kineto does for some HIP kernels) is matched raw, with an
  optional ``.kd``; any other name is matched as the trace spells it, which is the demangler's output on
  both sides (libstdc++'s ``__cxa_demangle``). The regex is anchored and escapes only metacharacters.
- ``--kernel-iteration-range [N-N]``: the N-th dispatch of each matching kernel symbol, counted from 1 per
  kernel symbol (per code object and GPU), every dispatch of it counted whether filtered or not. So N is one
  plus the earlier launches of that very name in the process, as the trace shows them (the ``[A-B]`` form is
  the one every rocprofv3 version parses; a bare ``[N]`` is rejected by some).
Every argument is shell-quoted: kernel names are untrusted text.
"""

from __future__ import annotations

import re
import shlex

from tracekit.analysis.steps import regex_literal
from tracekit.files import is_display_control

#: Counters collected with the selected dispatch: waves launched and GPU-busy cycles, which fit one pass on
#: every Instinct generation. rocprof-compute (docs/deep-dive.md) collects the full set over several passes.
DEFAULT_COUNTERS = ("SQ_WAVES", "GRBM_GUI_ACTIVE")


def _escape(kernel: str) -> str:
    """``kernel`` as a literal ECMAScript regex, control characters as \\xHH and the characters that change
    how text displays (bidi controls, line separators, zero-width: ``tracekit.report.text``) as \\uHHHH, so
    the printed line stays printable and shows what it matches."""
    return "".join(f"\\x{ord(ch):02x}" if ord(ch) < 32 or 127 <= ord(ch) < 160
                   else f"\\u{ord(ch):04x}" if is_display_control(ch) else regex_literal(ch) for ch in kernel)


def is_mangled(kernel: str) -> bool:
    """An Itanium-mangled symbol, which rocprofv3 must be told to match undemangled."""
    return re.match(r"^_Z", kernel) is not None


MAX_NAME_CHARS = 8192  # longer names are matched by head and tail: one shell argument must stay < 128 KiB


def name_regex(kernel: str) -> str:
    """The anchored ECMAScript regex that matches exactly ``kernel`` (with an optional ``.kd`` for a mangled
    symbol). A name over MAX_NAME_CHARS is matched by its first and last MAX_NAME_CHARS/2 characters with
    anything between, as the ncu filter does: execve refuses a single argument over 128 KiB."""
    if len(kernel) <= MAX_NAME_CHARS:
        body = _escape(kernel)
    else:
        half = MAX_NAME_CHARS // 2
        body = f"{_escape(kernel[:half])}[\\s\\S]*{_escape(kernel[-half:])}"
    return f"^{body}(\\.kd)?$" if is_mangled(kernel) else f"^{body}$"


def rocprof_command(kernel: str, launch_skip: int, out_name: str, app: str) -> str:
    """One quoted rocprofv3 command collecting counters for dispatch ``launch_skip + 1`` of ``kernel`` (``app``:
    the application's command line, already quoted, or a quoted placeholder)."""
    name = name_regex(kernel)
    n = launch_skip + 1
    args = ["rocprofv3", "--pmc", *DEFAULT_COUNTERS]
    if is_mangled(kernel):
        args.append("--mangled-kernels")
    args += ["--kernel-include-regex", name, "--kernel-iteration-range", f"[{n}-{n}]",
             "--output-format", "csv", "-d", out_name, "-o", out_name, "--"]
    return f"{shlex.join(args)} {app}"
