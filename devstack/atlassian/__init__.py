"""A local emulator of the Confluence REST API, seeded with the Hive space (see server.py)."""
