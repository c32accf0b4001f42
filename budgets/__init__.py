"""Kernel classes and their per-config budgets from the floor model."""
