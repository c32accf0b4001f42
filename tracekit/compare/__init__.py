"""Comparisons: a trace or report against another (diff), serving-benchmark results against the floor (reconcile)."""
