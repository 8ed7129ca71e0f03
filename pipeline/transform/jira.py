"""Jira text → Markdown: wiki markup (Data Center, REST v2) through jira2markdown, Atlassian
Document Format (Cloud, REST v3) through a walk of its nodes. Unknown ADF nodes keep their text,
so nothing an issue says is dropped."""

from __future__ import annotations

import functools
import threading
from typing import Any

# Raised when the conversion changes, so stored issues are converted again from their kept text
# (2: restricted comments stay out of an issue's text; 3: and become documents of their own).
CONVERTER = 3


@functools.cache
def _wiki_grammar() -> Any:
    """jira2markdown's grammar, built once (building it costs more than most conversions). The
    library sets pyparsing's default whitespace on import, so it is imported only here."""
    from jira2markdown.elements import MarkupElements
    from pyparsing import Forward

    elements = MarkupElements()
    inline, markup = Forward(), Forward()
    inline << elements.expr(inline, markup, {}, [e for e in elements if e.is_inline_element])
    markup << elements.expr(inline, markup, {}, elements)
    return markup


_GRAMMAR_LOCK = threading.Lock()  # a pyparsing grammar is not safe to share between threads


def wiki_to_markdown(markup: str) -> str:
    """Jira wiki markup as Markdown (jira2markdown)."""
    with _GRAMMAR_LOCK:
        return _wiki_grammar().transform_string(markup).strip()


def adf_to_markdown(document: Any) -> str:
    """An ADF document (or any of its nodes) as Markdown."""
    if not isinstance(document, dict):
        return ""
    return _blocks(document.get("content") or []).strip()


def to_markdown(text: Any) -> str:
    """A description or comment body as the API sent it: ADF (a dict) or wiki markup (a string)."""
    if isinstance(text, dict):
        return adf_to_markdown(text)
    return wiki_to_markdown(text) if isinstance(text, str) else ""


def _blocks(nodes: list[Any], indent: str = "") -> str:
    return "\n\n".join(part for part in (_block(node, indent) for node in nodes if isinstance(node, dict)) if part)


def _block(node: dict[str, Any], indent: str) -> str:
    kind = node.get("type")
    content = node.get("content") or []
    if kind == "paragraph":
        return indent + _inline(content)
    if kind == "heading":
        level = min(max(int((node.get("attrs") or {}).get("level", 1)), 1), 6)
        return f"{indent}{'#' * level} {_inline(content)}"
    if kind == "codeBlock":
        language = (node.get("attrs") or {}).get("language") or ""
        return f"{indent}```{language}\n{_plain(content)}\n{indent}```"
    if kind in ("bulletList", "orderedList"):
        lines = []
        for number, item in enumerate(content, start=1):
            marker = f"{number}." if kind == "orderedList" else "-"
            inner = _blocks(item.get("content") or [], indent + "  ").strip() if isinstance(item, dict) else ""
            lines.append(f"{indent}{marker} {inner}")
        return "\n".join(lines)
    if kind == "blockquote":
        return "\n".join(f"{indent}> {line}" for line in _blocks(content).splitlines())
    if kind == "rule":
        return f"{indent}---"
    if kind == "table":
        rows = [[_inline((cell.get("content") or [{}])[0].get("content") or []) for cell in row.get("content") or []] for row in content if isinstance(row, dict)]
        if not rows:
            return ""
        width = max(len(row) for row in rows)
        rows = [row + [""] * (width - len(row)) for row in rows]
        lines = ["| " + " | ".join(cell.replace("|", "\\|") for cell in rows[0]) + " |", "|" + " --- |" * width]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows[1:]]
        return "\n".join(indent + line for line in lines)
    if kind in ("panel", "expand", "nestedExpand", "layoutSection", "layoutColumn", "listItem", "doc"):
        return _blocks(content, indent)
    return indent + (_inline(content) if content else _inline([node]))


def _inline(nodes: list[Any]) -> str:
    parts = []
    for node in nodes:
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind == "text":
            parts.append(_marked(node.get("text", ""), node.get("marks") or []))
        elif kind == "hardBreak":
            parts.append("  \n")
        elif kind == "mention":
            parts.append("@" + str((node.get("attrs") or {}).get("text", "")).lstrip("@"))
        elif kind in ("inlineCard", "blockCard"):
            url = (node.get("attrs") or {}).get("url", "")
            parts.append(f"<{url}>" if url else "")
        elif kind in ("emoji", "status", "date"):
            attrs = node.get("attrs") or {}
            parts.append(str(attrs.get("text") or attrs.get("shortName") or attrs.get("timestamp") or ""))
        else:
            parts.append(_inline(node.get("content") or []))
    return "".join(parts)


def _marked(text: str, marks: list[Any]) -> str:
    for mark in marks:
        kind = mark.get("type") if isinstance(mark, dict) else None
        if kind == "code":
            text = f"`{text}`"
        elif kind == "strong":
            text = f"**{text}**"
        elif kind == "em":
            text = f"*{text}*"
        elif kind == "strike":
            text = f"~~{text}~~"
        elif kind == "link":
            text = f"[{text}]({(mark.get('attrs') or {}).get('href', '')})"
    return text


def _plain(nodes: list[Any]) -> str:
    return "".join(node.get("text", "") for node in nodes if isinstance(node, dict))


def issue_markdown(key: str, summary: str, description: Any, comments: list[tuple[str | None, str, Any]]) -> str:
    """An issue as one Markdown document: its key and summary as the title, its description, then
    its comments (author, ISO date, text) under their own heading."""
    parts = [f"# {key}: {summary}"]
    text = to_markdown(description)
    if text:
        parts.append(text)
    if comments:
        parts.append("## Comments")
        parts += [f"**{author or 'unknown'}**, {when}:\n\n{to_markdown(body)}" for author, when, body in comments]
    return "\n\n".join(parts) + "\n"


def comment_title(key: str, author: str | None, visibility: tuple[str, str] | list[str]) -> str:
    """A restricted comment's title: its issue, its author and who may read it."""
    kind, name = visibility
    return f"{key}: comment by {author or 'unknown'} ({kind} {name})"


def issue_texts(
    key: str, summary: str, description: Any, comments: list[dict[str, Any]]
) -> tuple[str, dict[str, str]]:
    """An issue's Markdown (its description and the comments everyone who sees it sees) and, by
    comment id, the Markdown of each comment restricted to a role or a group: its readers are
    fewer than the issue's, so it is a document of its own (DESIGN.md A14), titled by its issue."""
    shared = [(c.get("author"), c.get("created", ""), c.get("body")) for c in comments if not c.get("visibility")]
    restricted = {
        str(c["id"]): f"# {comment_title(key, c.get('author'), c['visibility'])}\n\n"
        f"On {key}: {summary}. **{c.get('author') or 'unknown'}**, {c.get('created', '')}:\n\n{to_markdown(c.get('body'))}\n"
        for c in comments
        if c.get("visibility") and c.get("id")
    }
    return issue_markdown(key, summary, description, shared), restricted

