"""Links inside returned text (DESIGN.md A11): a link to something the caller cannot see keeps its
text and loses its target, exactly as a link to a page that does not exist.

Wiki text is the visible page's own content, but the targets of its links are other objects: a
link to a restricted page would hand out that page's id. Every reference in every text a response
carries is collected, authorized through the request's gate in one batch, and each reference the
caller may not see is rewritten:

* ``[text](target)`` becomes ``text``, ``![alt](target)`` becomes ``alt``;
* a bare reference (``page:123``, a Confluence URL holding a page id) becomes ``(unavailable link)``.

References recognised: Wayfinder's typed page ids (``page:123``, with an optional ``#anchor``) and
Confluence URLs that name a page by id (``viewpage.action?pageId=123``, Cloud's
``/pages/123/...``, attachment downloads ``/download/attachments/123/...``). A reference that
does not parse as a page id is treated as hidden: unknown, like deleted, gets no target.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from authz.gate import Gate
from core.text import MARKDOWN_LINK

UNAVAILABLE = "(unavailable link)"

_TYPED_PAGE = re.compile(r"(?<![\w:/.])page:(?P<id>\d+)(?:#[\w.~%-]*)?(?![\w])")
_URL = re.compile(r"https?://[^\s)<>\]\"'`]+|(?<![\w/])/(?:wiki/|confluence/)?(?:pages|download/attachments)/[^\s)<>\]\"'`]+")
_AUTOLINK_OR_URL = re.compile(rf"<?(?P<url>{_URL.pattern})>?")  # a bare URL, or an autolink <URL>
_URL_PAGE_ID = re.compile(r"[?&]pageId=(?P<a>\d+)|/pages/(?P<b>\d+)(?:/|$|#)|/download/attachments/(?P<c>\d+)/")


def _url_pages(url: str) -> set[str]:
    return {f"page:{m['a'] or m['b'] or m['c']}" for m in _URL_PAGE_ID.finditer(url)}


def references(text: str) -> set[str]:
    """Typed ids of the pages ``text`` links to or names."""
    found = {f"page:{m['id']}" for m in _TYPED_PAGE.finditer(text)}
    for url in _URL.findall(text):
        found |= _url_pages(url)
    return found


def _hides(target: str, visible: set[str]) -> bool:
    return bool(references(target) - visible)


def render(text: str, visible: set[str]) -> str:
    """``text`` with every reference outside ``visible`` stripped of its target."""

    def link(match: re.Match[str]) -> str:
        return match["text"] if _hides(match["target"], visible) else match[0]

    text = MARKDOWN_LINK.sub(link, text)
    text = _AUTOLINK_OR_URL.sub(lambda m: UNAVAILABLE if _hides(m["url"], visible) else m[0], text)
    return _TYPED_PAGE.sub(lambda m: m[0] if f"page:{m['id']}" in visible else UNAVAILABLE, text)


def references_in(texts: Iterable[str]) -> set[str]:
    """Typed ids of every page ``texts`` link to or name."""
    return set().union(*(references(text) for text in texts))


async def redact(gate: Gate, texts: Sequence[str]) -> list[str]:
    """Each of ``texts`` with the targets the caller may not see removed, decided in one batch
    (none, when the gate already knows every target)."""
    wanted = references_in(texts)
    visible = await gate.visible(sorted(wanted)) if wanted else set()
    return [render(text, visible) for text in texts]
