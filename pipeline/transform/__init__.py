"""Source formats to Markdown: Confluence storage XHTML (confluence.py)."""
