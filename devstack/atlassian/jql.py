"""The subset of JQL (Jira Query Language) the emulator understands, in the grammar of
:mod:`devstack.atlassian.query`.

Fields: ``project``, ``issuetype`` (or ``type``), ``parent``, ``key`` (or ``issuekey``),
``status``, ``labels``, ``updated``/``created`` (dates, also relative: ``-15m``, ``-2h``, ``-1d``,
``-1w``), ``text`` and ``summary`` (keyword search with ``~``). Values compare case-insensitively,
as in Jira.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from devstack.atlassian.jira import Issue, Jira
from devstack.atlassian.query import COMPARE, Parser, Query, QueryError

_WORD = re.compile(r"\w+", re.U)
_RELATIVE = re.compile(r"^-(\d+)([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_FIELDS = {"project", "issuetype", "parent", "key", "status", "labels", "updated", "created", "text", "summary"}
_ALIASES = {"type": "issuetype", "issuekey": "key"}

Predicate = Callable[[Issue], bool]


def _clause(jira: Jira, now: datetime, name: str, op: str, value: str, parser: Parser[Issue]) -> Predicate:
    if name in ("updated", "created"):
        if op not in COMPARE:
            raise parser.error(f"the operator '{op}' is not supported by the '{name}' field")
        relative = _RELATIVE.match(value.strip())
        when = now - timedelta(**{_UNITS[relative[2]]: int(relative[1])}) if relative else parser.date(value)
        compare = COMPARE[op]
        pick = (lambda issue: issue.updated) if name == "updated" else (lambda issue: issue.created)
        return lambda issue: compare(pick(issue).replace(second=0, microsecond=0), when.replace(second=0, microsecond=0))
    if name in ("text", "summary"):
        if op not in ("~", "!~"):
            raise parser.error(f"the operator '{op}' is not supported by the '{name}' field")
        terms = [t.lower() for t in _WORD.findall(value)]
        if not terms:
            raise parser.error(f"the field '{name}' needs a word to search for")
        parser.text_terms.extend(terms)

        def words(issue: Issue) -> set[str]:
            text = issue.summary if name == "summary" else " ".join([issue.summary, issue.description, *(c.body for c in issue.comments)])
            return {w.lower() for w in _WORD.findall(text)}

        hit: Predicate = lambda issue: all(term in words(issue) for term in terms)  # noqa: E731
        return hit if op == "~" else (lambda issue: not hit(issue))
    if op not in ("=", "!="):
        raise parser.error(f"the operator '{op}' is not supported by the '{name}' field")
    wanted = value.lower()
    if name == "project" and wanted.upper() not in jira.projects and not any(p.name.lower() == wanted for p in jira.projects.values()):
        raise parser.error(f"the value '{value}' does not exist for the field 'project'")
    getters: dict[str, Callable[[Issue], object]] = {
        "project": lambda issue: wanted in (issue.project_key.lower(), jira.projects[issue.project_key].name.lower()),
        "issuetype": lambda issue: issue.issue_type.lower() == wanted,
        "parent": lambda issue: (issue.parent_key or "").lower() == wanted,
        "key": lambda issue: issue.key.lower() == wanted,
        "status": lambda issue: issue.status.lower() == wanted,
        "labels": lambda issue: wanted in [label.lower() for label in issue.labels],
    }
    get = getters[name]
    return get if op == "=" else (lambda issue: not get(issue))  # type: ignore[return-value]


def parse(jql: str, jira: Jira, time_zone: str) -> Query[Issue]:
    """Parse ``jql`` for a user in ``time_zone``; raises QueryError in Jira's wording."""
    now = jira.site.clock()
    return Parser[Issue](
        jql, fields=_FIELDS, clause=lambda *comparison: _clause(jira, now, *comparison), zone=ZoneInfo(time_zone), aliases=_ALIASES,
        describe=lambda _text, why: f"Error in the JQL Query: {why}.",
    ).parse()


def order_key(field: str) -> Callable[[Issue], object]:
    keys: dict[str, Callable[[Issue], object]] = {
        "updated": lambda issue: issue.updated,
        "created": lambda issue: issue.created,
        "key": lambda issue: (issue.project_key, issue.number),
        "project": lambda issue: issue.project_key,
        "issuetype": lambda issue: issue.issue_type,
    }
    if field not in keys:
        raise QueryError(f"Error in the JQL Query: cannot order by '{field}'.")
    return keys[field]
