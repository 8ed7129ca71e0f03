"""Evaluation datasets, evaluators and runs (later issues)."""
