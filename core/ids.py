"""Typed ids: ``space:HIVE``, ``page:27362069``, ``chunk:page:27362069#3``, ``entity:<name>``.

OpenFGA objects use the same ``type:id`` spelling, so an id can be checked as it is.
"""

from __future__ import annotations

import re

from core.errors import InvalidArgument

_PAGE_ID = re.compile(r"^\d{1,20}$")
_SPACE_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_~-]{0,63}$")
_USER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


def space_id(key: str) -> str:
    if not _SPACE_KEY.match(key):
        raise InvalidArgument(f"invalid space key: {key!r}")
    return f"space:{key}"


def page_id(raw: str | int) -> str:
    raw = str(raw)
    if not _PAGE_ID.match(raw):
        raise InvalidArgument(f"invalid page id: {raw!r}")
    return f"page:{raw}"


def user_id(name: str) -> str:
    if not _USER_ID.match(name):
        raise InvalidArgument(f"invalid user id: {name!r}")
    return f"user:{name}"


def parse(typed_id: str) -> tuple[str, str]:
    """Split ``type:id`` and validate the parts Wayfinder serves; raise InvalidArgument otherwise."""
    if not isinstance(typed_id, str) or ":" not in typed_id:
        raise InvalidArgument(f"invalid id {typed_id!r}: expected 'type:id', e.g. 'page:27362069'")
    kind, _, raw = typed_id.partition(":")
    if kind == "page":
        page_id(raw)
    elif kind == "space":
        space_id(raw)
    else:
        raise InvalidArgument(f"invalid id {typed_id!r}: unknown kind {kind!r} (expected page or space)")
    return kind, raw
