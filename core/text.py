"""Markdown helpers shared by fetch and chunking: sections by heading, slugs, token estimates,
titles as paths name them."""

from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass

_HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TOKEN = re.compile(r"\w+|[^\w\s]")
# An inline Markdown link or image: [text](target) or ![alt](target "title").
MARKDOWN_LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]\n]*)\]\(\s*<?(?P<target>[^)\s>]*)>?(?:\s+\"[^\"\n]*\")?\s*\)")
# A reference to a page by id, in any spelling Wayfinder or Confluence uses: the typed id
# (``page:123``), ``pageId=123`` in a query string, and the id-bearing paths of Cloud and Data
# Center (``/pages/123``, ``/pages/edit-v2/123``, ``/download/attachments/123``, thumbnails,
# ``/rest/api/content/123``). Matched case-insensitively on text whose ``&amp;`` and
# percent-encoded ``=`` and ``/`` are decoded first (:func:`page_references`).
_PAGE_REFERENCE = re.compile(
    r"page:(?P<a>[0-9]+)"
    r"|pageid=(?P<b>[0-9]+)"
    r"|/pages/(?:[a-z0-9._~-]+/)?(?P<c>[0-9]+)(?![0-9])"
    r"|/download/(?:attachments|thumbnails)/(?P<d>[0-9]+)(?![0-9])"
    r"|/rest/api/content/(?P<e>[0-9]+)(?![0-9])",
    re.IGNORECASE | re.ASCII,
)
# A reference to an issue, project or space, the other objects a link can name: the typed ids
# (``issue:HIVE-12``, ``project:HIVE``, ``space:HIVE``); Jira's issue paths (``/browse/HIVE-12``,
# ``/issues/HIVE-12``, ``/rest/api/2/issue/HIVE-12``, ``selectedIssue=HIVE-12``) and project paths
# (``/browse/HIVE``, ``/projects/HIVE``); Confluence's space paths (``/spaces/HIVE``,
# ``/display/HIVE``, ``spaceKey=HIVE``). A bare key in prose is no reference: "UTF-8" and
# "SHA-256" are spelled like issue keys.
_OBJECT_REFERENCE = re.compile(
    r"(?<![a-z0-9_])issue:(?P<issue_a>[a-z][a-z0-9_]*-[0-9]+)"
    r"|/(?:browse|issues)/(?P<issue_b>[a-z][a-z0-9_]*-[0-9]+)"
    r"|/rest/api/[a-z0-9]+/issue/(?P<issue_c>[a-z][a-z0-9_]*-[0-9]+)"
    r"|selectedissue=(?P<issue_d>[a-z][a-z0-9_]*-[0-9]+)"
    r"|(?<![a-z0-9_])project:(?P<project_a>[a-z][a-z0-9_]*)(?![a-z0-9_-])"
    r"|/(?:browse|projects)/(?P<project_b>[a-z][a-z0-9_]*)(?![a-z0-9_-])"
    r"|(?<![a-z0-9_])space:(?P<space_a>[a-z0-9_~-]+)"
    r"|/(?:spaces|display)/(?P<space_b>[a-z0-9_~-]+)"
    r"|spacekey=(?P<space_c>[a-z0-9_~-]+)",
    re.IGNORECASE | re.ASCII,
)
# Spellings that point into Confluence or Jira without an id to check: a page by title
# (``/display/SPACE/Title``, ``viewpage.action?title=``), a short link (``/x/AbCd``), an issue by
# its numeric id (``/rest/api/2/issue/10001``, ``selectedIssue=10001``).
_UNRESOLVED_REFERENCE = re.compile(
    r"/display/[^/\s|>]+/[^\s|>]"
    r"|view(?:page|blogpost)\.action(?![^\s|>]*pageid=[0-9])"
    r"|/x/[a-z0-9_-]+"
    r"|/rest/api/[a-z0-9]+/issue/[0-9]"
    r"|selectedissue=[0-9]",
    re.IGNORECASE | re.ASCII,
)
_ENCODED = re.compile(r"&amp;|%3d|%2f", re.IGNORECASE)
_DECODED = {"&amp;": "&", "%3d": "=", "%2f": "/"}
_DIGIT = re.compile(r"[0-9]")


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


def page_references(text: str) -> set[str]:
    """Typed ids (``page:123``) of every page ``text`` names, in any spelling of
    ``_PAGE_REFERENCE``. Over-matching is safe: its callers treat a reference as hidden unless
    the page is shown to be visible."""
    if not _DIGIT.search(text):  # every spelling holds the id's digits, and decoding adds none
        return set()
    return {f"page:{int(next(g for g in m.groups() if g))}" for m in _PAGE_REFERENCE.finditer(_decoded(text))}


def object_references(text: str) -> set[str]:
    """Typed ids of every page, issue, project and space ``text`` names, in any spelling of
    :func:`page_references` and ``_OBJECT_REFERENCE``; issue and project keys are upper-cased as
    Jira spells them. Over-matching is safe for the same reason as there."""
    found = page_references(text)
    for match in _OBJECT_REFERENCE.finditer(_decoded(text)):
        kind, value = next((name.partition("_")[0], value) for name, value in match.groupdict().items() if value)
        found.add(f"{kind}:{value if kind == 'space' else value.upper()}")
    return found


def unresolved_references(text: str) -> list[str]:
    """Every spelling in ``text`` that points into Confluence or Jira without an id: the object
    it names cannot be checked, so a caller treats it as hidden."""
    return [match[0] for match in _UNRESOLVED_REFERENCE.finditer(_decoded(text))]


def _decoded(text: str) -> str:
    return _ENCODED.sub(lambda m: _DECODED[m[0].lower()], text)


def plain(text: str) -> str:
    """Links reduced to their text: what a reader sees, without any target."""
    return MARKDOWN_LINK.sub(lambda m: m["text"], text)


def slugify(title: str) -> str:
    """A heading's slug, from the text a reader sees. Neither a link's target nor a page
    reference shapes it, so a slug is the same for every reader and names no page."""
    words = " ".join("link" if page_references(word) else word for word in plain(title).split())
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
