"""Typed ids: ``space:HIVE``, ``page:27362069``, ``image:att27362100``, ``user:alice``,
``agent:digest-bot``, ``task:weekly``, ``project:HIVE``, ``issue:HIVE-1234``, ``comment:10042`` (a
Jira comment restricted to a role or a group: a document of its own).

OpenFGA objects use the same ``type:id`` spelling, so an id that passed validation here can be
checked as it is: every pattern matches the whole string (no trailing newline slips through) and
is bounded in length, so a malformed id is an ``InvalidArgument``, never an engine error.
"""

from __future__ import annotations

import hashlib
import re

from core.errors import InvalidArgument

MAX_ID_CHARS = 200  # longer than any id Wayfinder serves; longer input is refused before matching

_PAGE_ID = re.compile(r"[0-9]{1,20}")
_COMMENT_ID = re.compile(r"[0-9]{1,20}")  # Jira's comment ids: one sequence for the whole site
_IMAGE_ID = re.compile(r"att[0-9]{1,20}")  # an attachment id, as Confluence spells them
_SPACE_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_~-]{0,63}")
_PROJECT_KEY = re.compile(r"[A-Z][A-Z0-9_]{0,63}")  # Jira's default key pattern, bounded
ISSUE_KEY = re.compile(r"[A-Z][A-Z0-9_]{0,63}-[0-9]{1,12}")
# Users, agents and tasks: no ':', '#', '*' or whitespace, which OpenFGA gives a meaning.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")



def _shown(raw: object) -> str:
    """The value as an error message may quote it: repr, cut short."""
    text = repr(raw)
    return text if len(text) <= 80 else text[:77] + "..."


def _valid(pattern: re.Pattern[str], raw: object, what: str) -> str:
    if not isinstance(raw, str) or len(raw) > MAX_ID_CHARS or not pattern.fullmatch(raw):
        raise InvalidArgument(f"invalid {what}: {_shown(raw)}")
    return raw


def space_id(key: str) -> str:
    return f"space:{_valid(_SPACE_KEY, key, 'space key')}"


def page_id(raw: str | int) -> str:
    return f"page:{_valid(_PAGE_ID, str(raw) if isinstance(raw, int) else raw, 'page id')}"


def project_id(key: str) -> str:
    return f"project:{_valid(_PROJECT_KEY, key, 'project key')}"


def issue_id(key: str) -> str:
    return f"issue:{_valid(ISSUE_KEY, key, 'issue key')}"


def comment_id(raw: str) -> str:
    return f"comment:{_valid(_COMMENT_ID, raw, 'comment id')}"


def image_id(raw: str) -> str:
    return f"image:{_valid(_IMAGE_ID, raw, 'image id')}"


def user_id(name: str) -> str:
    return f"user:{_valid(_NAME, name, 'user id')}"


def is_name(raw: str) -> bool:
    """Is ``raw`` spelled as a user, group, agent or task name may be?"""
    return len(raw) <= MAX_ID_CHARS and _NAME.fullmatch(raw) is not None


def group_id(name: str) -> str:
    return f"group:{_valid(_NAME, name, 'group id')}"


def agent_id(name: str) -> str:
    return f"agent:{_valid(_NAME, name, 'agent id')}"


def task_id(name: str) -> str:
    return f"task:{_valid(_NAME, name, 'task id')}"


def parse(typed_id: object) -> tuple[str, str]:
    """Split ``type:id`` and validate the parts Wayfinder serves; raise InvalidArgument otherwise."""
    if not isinstance(typed_id, str) or len(typed_id) > MAX_ID_CHARS or ":" not in typed_id:
        raise InvalidArgument(f"invalid id {_shown(typed_id)}: expected 'type:id', e.g. 'page:27362069'")
    kind, _, raw = typed_id.partition(":")
    if kind == "page":
        page_id(raw)
    elif kind == "space":
        space_id(raw)
    elif kind == "image":
        image_id(raw)
    elif kind == "project":
        project_id(raw)
    elif kind == "issue":
        issue_id(raw)
    elif kind == "comment":
        comment_id(raw)
    else:
        raise InvalidArgument(f"invalid id {_shown(typed_id)}: unknown kind (expected page, space, image, project, issue or comment)")
    return kind, raw


def user_name(raw: str) -> str:
    """The one Wayfinder id of a person, from the name any entry point gives (DESIGN.md A14): a
    Confluence or Jira user (Data Center username, Cloud account id) in restrictions, groups,
    roles, levels, reporters and assignees; a token's ``sub``; the stdio principal; the Slack
    bot's directory answer. Every entry maps a raw name through here exactly once, so the same
    person is the same id everywhere, and no raw name is taken as an id: a name shaped like a
    digest is digested again, so nobody can pick a name equal to another person's id."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidArgument(f"invalid user name: {_shown(raw)}")
    return safe_name(raw)


def safe_name(name: str) -> str:
    """A Confluence or Jira user or group name as a Wayfinder id. Names OpenFGA cannot hold
    (spaces, ':', '#', …), and names that start with the digests' prefix ``x-``, become a stable
    digest: the same name maps to the same id everywhere, so a restriction to such a group still
    restricts (dropping it would widen the page)."""
    try:
        user_id(name)
    except InvalidArgument:
        return _digest_name(name)
    # The digests' own prefix is reserved: a user named like a digest must not pass as its owner.
    return _digest_name(name) if name.startswith("x-") else name


def _digest_name(name: str) -> str:
    return "x-" + hashlib.sha256(name.encode()).hexdigest()[:32]


def jira_group_name(name: str) -> str:
    """A Jira group as a Wayfinder id, never the id of a Confluence group, even one of the same
    name: the two products' directories need not agree, and one group's members must not widen
    the other's. ``x-jira-`` is a prefix no :func:`safe_name` can produce."""
    candidate = f"x-jira-{name}"
    try:
        group_id(candidate)
    except InvalidArgument:
        return "x-jira-" + hashlib.sha256(name.encode()).hexdigest()[:32]
    return candidate
