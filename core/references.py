"""References inside text: every spelling in which a page or an issue names another object.

A reference comes back as the typed id of what it names (``page:123``, ``issue:HIVE-1``), so the
gate can be asked about it like any other object. The spellings:

* pages by id: the typed id, ``pageId=123`` in a query string, and the id-bearing paths of Cloud
  and Data Center (``/pages/123``, ``/pages/edit-v2/123``, ``/spaces/KEY/pages/123/Title``,
  ``/download/attachments/123``, thumbnails, ``/rest/api/content/123``);
* pages by tiny link (``/wiki/x/<code>`` on Cloud, ``/x/<code>`` on Data Center): the code is the
  page id itself (:func:`_tiny_link_page`);
* issues by key: the typed id, ``/browse/KEY-1``, ``/issues/KEY-1``, ``selectedIssue=KEY-1`` and
  ``/rest/api/<version>/issue/KEY-1``;
* projects and spaces by key: the typed ids (``project:KEY``, ``space:KEY``, not inside a longer
  word: ``namespace:default`` names nothing) and their home pages, ``/browse/KEY``,
  ``/projects/KEY``, ``/spaces/KEY`` and ``/display/KEY``;
* links that name their target in a way no id can be read from: by title
  (``/display/KEY/Title``, ``viewpage.action?spaceKey=KEY&title=Title``), an issue by its numeric
  id (``/rest/api/2/issue/10001``), a tiny link too long to hold a page id. Each is
  :data:`UNRESOLVED`.

Matching ignores case (the tiny link's code keeps it: it is base64) and reads ``&amp;`` and
percent-encoded ``=``, ``/``, ``:``, ``?`` and ``&`` as what they encode. Over-matching is safe:
callers treat a reference as hidden unless the gate shows it visible.
"""

from __future__ import annotations

import base64
import re

#: What a link that names no id refers to. It is no well-formed id, so no gate ever finds it
#: visible: such a link always loses its target, as a link to a hidden or deleted page does
#: (unknown is forbidden).
UNRESOLVED = "link:unresolved"

_ISSUE_KEY = r"[a-z][a-z0-9_]*-[0-9]+(?![0-9])"
_KEY_END = r"(?![a-z0-9_~-])"  # a key ends where no character of a key follows
# A project's or space's own page ends its path: ``/spaces/KEY/pages/1`` names the page alone.
_HOME_END = r"/?(?=[\s?#\"')\]>|]|$)"
# A tiny link's path starts a URL's path: after its host (and context path), after /wiki, or at
# the start of a relative link; ``src/x/util`` is no tiny link.
_TINY_START = r"(?://[^/\s]+(?:/[a-z0-9._~-]+)?|/wiki|(?:^|(?<=[\s(\"'<\[=])))"
_REFERENCE = re.compile(
    r"(?:page:|pageid=|/download/(?:attachments|thumbnails)/|/rest/api/content/"
    r"|/pages/(?:(?![0-9]+/)[a-z0-9._~-]+/)?)(?P<page>[0-9]+)(?![0-9])"
    rf"|{_TINY_START}/x/(?P<tiny>[a-z0-9_-]+)"
    rf"|(?:issue:|/browse/|/issues/|selectedissue=|/rest/api/(?:[0-9]+|latest)/issue/)(?P<issue>{_ISSUE_KEY})"
    rf"|(?<![a-z0-9_])project:(?P<project>[a-z][a-z0-9_]*){_KEY_END}"
    rf"|(?:/browse/|/projects/)(?P<project_home>[a-z][a-z0-9_]*){_HOME_END}"
    rf"|(?<![a-z0-9_])space:(?P<space>[a-z0-9_~-]+){_KEY_END}"
    rf"|(?:/spaces/|/display/)(?P<space_home>[a-z0-9_~-]+){_HOME_END}"
    r"|(?P<unresolved>/display/[^\s/]|[?&]spacekey=|/rest/api/(?:[0-9]+|latest)/issue/[0-9])",
    re.IGNORECASE | re.ASCII,
)
_ENCODED = re.compile(r"&amp;|%3d|%2f|%3a|%3f|%26", re.IGNORECASE)
_DECODED = {"&amp;": "&", "%3d": "=", "%2f": "/", "%3a": ":", "%3f": "?", "%26": "&"}
_MAY_REFER = re.compile(r"[:/=%]")  # every spelling holds one of these, encoded or not
# Confluence writes a tiny link's code in base64 with ``+`` as ``_`` and ``/`` as ``-`` (not the
# URL-safe alphabet of RFC 4648, which swaps them), from a page id of eight bytes at most.
_TINY_ALPHABET = str.maketrans("_-", "+/")
_TINY_CHARS = 11  # base64 digits of eight bytes


def references(text: str) -> set[str]:
    """Typed ids of everything ``text`` names or links to, in any spelling this module knows; a
    link that names no id adds :data:`UNRESOLVED`."""
    if not _MAY_REFER.search(text):
        return set()
    decoded = _ENCODED.sub(lambda m: _DECODED[m[0].lower()], text)
    return {_referred(m) for m in _REFERENCE.finditer(decoded)}


def _referred(match: re.Match[str]) -> str:
    if match["page"]:
        return f"page:{int(match['page'])}"
    if match["tiny"]:
        return _tiny_link_page(match["tiny"])
    if match["issue"]:
        return f"issue:{match['issue'].upper()}"
    if match["project"] or match["project_home"]:
        return f"project:{(match['project'] or match['project_home']).upper()}"
    if match["space"] or match["space_home"]:
        return f"space:{match['space'] or match['space_home']}"
    return UNRESOLVED


def _tiny_link_page(code: str) -> str:
    """The page a tiny link's code names. Confluence writes the id's bytes, least significant
    first, in base64, and drops the trailing ``A``s (zero bytes) and the padding; putting them
    back gives the bytes again. A code longer than eight bytes' worth holds no page id."""
    if len(code) > _TINY_CHARS:
        return UNRESOLVED
    digits = code.translate(_TINY_ALPHABET).ljust(_TINY_CHARS, "A") + "="
    return f"page:{int.from_bytes(base64.b64decode(digits), 'little')}"
