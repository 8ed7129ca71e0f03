"""The subset of CQL (Confluence Query Language) the emulator understands, in the grammar of
:mod:`devstack.atlassian.query`.

Fields: ``type``, ``space`` (or ``space.key``), ``id``, ``title``, ``ancestor``, ``parent``,
``label``, ``lastModified``/``created`` (dates), ``text``/``siteSearch`` (keyword search).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from zoneinfo import ZoneInfo

from devstack.atlassian.query import COMPARE, Parser, Query, QueryError
from devstack.atlassian.site import Page, Site

CqlError = QueryError
_WORD = re.compile(r"\w+", re.U)
_FIELDS = {"type", "space", "id", "title", "ancestor", "parent", "label", "lastmodified", "created", "text", "sitesearch"}
_ALIASES = {"space.key": "space"}

Predicate = Callable[[Page], bool]
_Parser = Parser[Page]


def _field(site: Site, name: str, op: str, value: str, parser: _Parser) -> Predicate:
    if name in ("lastmodified", "created"):
        if op not in COMPARE:
            raise parser.error(f"operator {op} does not apply to dates")
        when = parser.date(value)
        compare = COMPARE[op]
        pick = (lambda page: page.version.when) if name == "lastmodified" else (lambda page: page.created.when)
        # Confluence compares at minute precision: the stored time is cut to its minute.
        return lambda page: compare(pick(page).replace(second=0, microsecond=0), when)
    if name in ("text", "sitesearch") or (name == "title" and op in ("~", "!~")):
        if op not in ("~", "!~"):
            raise parser.error(f"{name} takes ~ or !~")
        terms = [t.lower() for t in _WORD.findall(value)]
        if not terms:
            raise parser.error(f"{name} ~ needs at least one word")
        parser.text_terms.extend(terms)
        hit = _text_match(name, terms, site)
        return hit if op == "~" else (lambda page: not hit(page))
    if op not in ("=", "!="):
        raise parser.error(f"operator {op} does not apply to {name}")
    getters: dict[str, Callable[[Page], object]] = {
        "type": lambda page: "page",
        "space": lambda page: page.space_key,
        "id": lambda page: page.id,
        "title": lambda page: page.title.lower(),
        "parent": lambda page: page.parent_id,
        "label": lambda page: value.lower() in [label.lower() for label in page.labels],
        "ancestor": lambda page: value in {a.id for a in site.ancestors(page)},
    }
    wanted: object = True if name in ("label", "ancestor") else (value.lower() if name == "title" else value)
    get = getters[name]
    if op == "=":
        return lambda page: get(page) == wanted
    return lambda page: get(page) != wanted


def _text_match(name: str, terms: list[str], site: Site) -> Predicate:
    """Every term appears as a word in the title or the text of the page (only the title for
    ``title ~``); ``siteSearch`` also looks at labels."""

    def words(page: Page) -> set[str]:
        text = page.title + " " + re.sub(r"<[^>]+>", " ", page.body)
        if name == "sitesearch":
            text += " " + " ".join(page.labels)
        return {w.lower() for w in _WORD.findall(text)}

    def matches(page: Page) -> bool:
        found = words(page) if name != "title" else {w.lower() for w in _WORD.findall(page.title)}
        return all(term in found for term in terms)

    return matches


def parse(cql: str, site: Site, time_zone: str) -> Query:
    """Parse ``cql`` for a user in ``time_zone``; raises :class:`CqlError` with Confluence's wording."""
    return Parser[Page](
        cql, fields=_FIELDS, clause=lambda *comparison: _field(site, *comparison), zone=ZoneInfo(time_zone), aliases=_ALIASES,
        describe=lambda text, why: f"Could not parse cql : {text} ({why})",
    ).parse()


def order_key(site: Site, field: str) -> Callable[[Page], object]:
    keys: dict[str, Callable[[Page], object]] = {
        "lastmodified": lambda page: page.version.when,
        "created": lambda page: page.created.when,
        "title": lambda page: page.title.lower(),
        "id": lambda page: int(page.id) if page.id.isdigit() else page.id,
    }
    if field not in keys:
        raise CqlError(f"Could not parse cql : cannot order by {field}")
    return keys[field]
