"""The subset of CQL (Confluence Query Language) the emulator understands, in the grammar of
:mod:`devstack.atlassian.query`.

Fields: ``type``, ``space`` (or ``space.key``), ``id``, ``title``, ``ancestor``, ``parent``,
``label``, ``lastModified``/``created`` (dates), ``text``/``siteSearch`` (keyword search).

Keyword search as Confluence's Lucene index answers it, simplified: ``text ~`` finds the pages
holding every word; ``siteSearch ~`` (the web UI's search, what MCP servers send for plain
questions) those holding any word that is not a stop word. Without ``ORDER BY`` the results come
by relevance (:func:`relevance`, BM25 over the title, counted twice, and the text).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from zoneinfo import ZoneInfo

from devstack.atlassian.query import COMPARE, Parser, Query, QueryError
from devstack.atlassian.site import Page, Site

CqlError = QueryError
_WORD = re.compile(r"\w+", re.U)
_FIELDS = {"type", "space", "id", "title", "ancestor", "parent", "label", "lastmodified", "created", "text", "sitesearch"}
_ALIASES = {"space.key": "space"}
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with".split()
)  # Lucene's English stop set
_K1, _B = 1.2, 0.75  # Lucene's BM25 defaults

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
        if name == "sitesearch":
            terms = [t for t in terms if t not in STOP_WORDS]
        parser.text_terms.extend(terms)
        hit = _text_match(name, terms, site)
        return hit if op == "~" else (lambda page: not hit(page))
    if op not in ("=", "!="):
        raise parser.error(f"operator {op} does not apply to {name}")
    getters: dict[str, Callable[[Page], object]] = {
        "type": lambda page: page.kind,
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
    """``text``: every term appears as a word in the title or the text of the page; ``title``:
    in the title; ``siteSearch``: any term, in the title, the text or the labels."""

    def matches(page: Page) -> bool:
        if name == "title":
            found = {w.lower() for w in _WORD.findall(page.title)}
        else:
            found = set(_counts(page.title, page.body))
            if name == "sitesearch":
                found |= {w.lower() for label in page.labels for w in _WORD.findall(label)}
        return (any if name == "sitesearch" else all)(term in found for term in terms)

    return matches


@lru_cache(maxsize=65536)
def _counts(title: str, body: str) -> Counter[str]:
    """The words of a page, the title's counted twice (a title match weighs more)."""
    return Counter(w.lower() for w in _WORD.findall(f"{title} {title} {re.sub(r'<[^>]+>', ' ', body)}"))


def relevance(site: Site, pages: Sequence[Page], terms: Sequence[str]) -> dict[str, float]:
    """BM25 of each page for the query's words (stop words left out), with the document
    frequencies and lengths of the whole site, as a search index holds them."""
    wanted = [t for t in dict.fromkeys(terms) if t not in STOP_WORDS]
    everything = [_counts(p.title, p.body) for p in site.pages.values()]
    if not wanted or not everything:
        return {page.id: 0.0 for page in pages}
    average = sum(c.total() for c in everything) / len(everything)
    idf = {t: math.log(1 + (len(everything) - (df := sum(t in c for c in everything)) + 0.5) / (df + 0.5)) for t in wanted}
    scores = {}
    for page in pages:
        counts = _counts(page.title, page.body)
        norm = _K1 * (1 - _B + _B * counts.total() / average)
        scores[page.id] = sum(idf[t] * counts[t] * (_K1 + 1) / (counts[t] + norm) for t in wanted if counts[t])
    return scores


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
