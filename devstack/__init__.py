"""No-Docker local services (OpenFGA, Neo4j) for development and integration tests."""
