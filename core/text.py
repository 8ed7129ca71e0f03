"""Markdown helpers shared by fetch and chunking: sections by heading, slugs, token estimates."""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TOKEN = re.compile(r"\w+|[^\w\s]")
# An inline Markdown link or image: [text](target) or ![alt](target "title").
MARKDOWN_LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]\n]*)\]\(\s*<?(?P<target>[^)\s>]*)>?(?:\s+\"[^\"\n]*\")?\s*\)")


def estimate_tokens(text: str) -> int:
    """Words and punctuation marks: close to what LLM tokenizers count for English and code."""
    return len(_TOKEN.findall(text))


def plain(text: str) -> str:
    """Links reduced to their text: what a reader sees, without any target."""
    return MARKDOWN_LINK.sub(lambda m: m["text"], text)


def slugify(title: str) -> str:
    """A heading's slug, from the text a reader sees (a link's target never shapes a slug)."""
    slug = re.sub(r"[^\w]+", "-", plain(title).lower()).strip("-")
    return slug or "section"


@dataclass(frozen=True)
class Section:
    slug: str
    title: str
    level: int  # 0 for the text before the first heading
    text: str


def sections(markdown: str) -> list[Section]:
    """Split at headings outside code fences; slugs are unique within the page (``-2``, ``-3``…)."""
    found: list[tuple[str, int, list[str]]] = [("", 0, [])]
    in_fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line)
        if heading:
            found.append((heading["title"], len(heading["hashes"]), [line]))
        else:
            found[-1][2].append(line)
    result: list[Section] = []
    seen: dict[str, int] = {}
    for title, level, lines in found:
        text = "\n".join(lines).strip()
        if not text:
            continue
        base = slugify(title) if level else "intro"
        seen[base] = seen.get(base, 0) + 1
        slug = base if seen[base] == 1 else f"{base}-{seen[base]}"
        result.append(Section(slug, plain(title), level, text + "\n"))
    return result
