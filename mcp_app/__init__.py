"""The MCP server: Wayfinder's tools for agents, bots and evaluation runs."""
