"""Markdown helpers shared by fetch and chunking: sections by heading, slugs, token estimates,
titles as paths name them."""

from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass

from core.references import references

_HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TOKEN = re.compile(r"\w+|[^\w\s]")
# An inline Markdown link or image: [text](target) or ![alt](target "title").
MARKDOWN_LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]\n]*)\]\(\s*<?(?P<target>[^)\s>]*)>?(?:\s+\"[^\"\n]*\")?\s*\)")


def title_key(title: str) -> str:
    """A title as a path names it: case, width and runs of whitespace do not matter."""
    return " ".join(unicodedata.normalize("NFKC", title).casefold().split())


def estimate_tokens(text: str) -> int:
    """Words and punctuation marks: close to what LLM tokenizers count for English and code."""
    return len(_TOKEN.findall(text))


def cut(text: str, start: int, max_tokens: int) -> int:
    """Where the part of ``text`` that begins at ``start`` and holds at most ``max_tokens`` (as
    :func:`estimate_tokens` counts) ends: after its last whole paragraph when that keeps at least
    half the budget, else after its last whole line, else after its last whole token. A part holds
    at least one token, so paging through always advances; the rest of ``text`` when it fits."""
    ends = [m.end() for m in itertools.islice(_TOKEN.finditer(text, start), max_tokens + 1)]
    if len(ends) <= max_tokens:
        return len(text)
    window = text[start : ends[max_tokens - 1]]
    half = ends[max(max_tokens // 2 - 1, 0)] - start
    paragraph, line = window.rfind("\n\n"), window.rfind("\n")
    if paragraph >= half:
        return start + paragraph + 2
    if line > 0:
        return start + line + 1
    return ends[max_tokens - 1]


def plain(text: str) -> str:
    """Links reduced to their text: what a reader sees, without any target."""
    return MARKDOWN_LINK.sub(lambda m: m["text"], text)


def slugify(title: str) -> str:
    """A heading's slug, from the text a reader sees. Neither a link's target nor a reference
    (:mod:`core.references`) shapes it, so a slug is the same for every reader and names nothing
    it links to."""
    words = " ".join("link" if references(word) else word for word in plain(title).split())
    slug = re.sub(r"[^\w]+", "-", words.lower()).strip("-")
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
