"""Batch pipeline: collect from a source, transform, and sync the stores."""
