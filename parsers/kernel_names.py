"""A kernel's function name from its demangled name: what Nsight tools call its short or function name.

``void at::native::(anonymous namespace)::layer_norm<float>(int, float*)`` -> ``layer_norm``;
``std::enable_if<!T7, void>::type internal::gemvx::kernel<int, 16>(Params)`` -> ``kernel``. The return
type, qualifiers, template arguments and parameters go; brackets are matched, so parentheses and spaces
inside template arguments (lambdas, ``(anonymous namespace)``) do not cut the name. Nsight Compute
selects kernels by this name under ``--kernel-name-base function``; its demangler spells the full name
differently from CUPTI's, so the full name cannot be matched across the two.
"""

from __future__ import annotations

_OPEN = {")": "(", ">": "<"}


def _matching_open(text: str, end: int) -> int:
    """Index of the bracket that opens the one closing at ``text[end]``; -1 when unbalanced."""
    close, depth = text[end], 0
    for i in range(end, -1, -1):
        if text[i] == close:
            depth += 1
        elif text[i] == _OPEN[close]:
            depth -= 1
            if depth == 0:
                return i
    return -1


def _last_top_level(text: str, sep: str) -> int:
    """Index just after the last ``sep`` outside every bracket pair; 0 when there is none."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch in ")>]}":
            depth += 1
        elif ch in "(<[{":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            return i + len(sep)
    return 0


def function_name(name: str) -> str:
    """The unqualified function name of a demangled kernel name; the name itself when none is found."""
    head = name.strip()
    for closer in ")>":  # the parameter list, then the function's own template arguments
        if head.endswith(closer):
            start = _matching_open(head, len(head) - 1)
            if start <= 0:
                return name
            head = head[:start].rstrip()
    head = head[_last_top_level(head, " "):]  # drop the return type
    return head[_last_top_level(head, "::"):] or name
