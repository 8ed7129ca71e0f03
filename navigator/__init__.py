"""Deterministic navigation of the human-curated trees, mirrored in Neo4j."""
