"""Content sources. Each one reports spaces, pages and permissions the way Confluence does."""
