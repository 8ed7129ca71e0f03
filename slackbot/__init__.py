"""The Slack front end: a bot that answers as the Slack user who asks, through the MCP server."""
