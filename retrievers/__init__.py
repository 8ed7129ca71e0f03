"""Retrievers: the semantic index and the authorized search over it."""
