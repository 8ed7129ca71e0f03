"""Sinks: make each store equal to what the source reports."""
