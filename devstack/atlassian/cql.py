"""The subset of CQL (Confluence Query Language) the emulator understands.

Fields: ``type``, ``space`` (or ``space.key``), ``id``, ``title``, ``ancestor``, ``parent``,
``label``, ``lastModified``/``created`` (dates), ``text``/``siteSearch`` (keyword search). Operators
``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``~``, ``!~``, ``in (...)``, ``not in (...)``, joined by
``AND``, ``OR``, ``NOT`` and parentheses, then ``ORDER BY field [ASC|DESC], ...``. Keywords and
field names are case-insensitive, as in Confluence.

Dates are minute-precise (``"yyyy-MM-dd HH:mm"``, ``"yyyy/MM/dd HH:mm"`` or a bare day) and are
read in the querying user's time zone, which is the trap a real sync has to handle.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from devstack.atlassian.site import Page, Site


class CqlError(ValueError):
    pass


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<op>!=|>=|<=|!~|=|<|>|~|\(|\)|,)
      | (?P<word>[^\s=!<>~(),"']+)
    )""",
    re.X,
)
_DATE = re.compile(r"^(\d{4})[-/](\d{2})[-/](\d{2})(?:\s+(\d{2}):(\d{2}))?$")
_WORD = re.compile(r"\w+", re.U)

Predicate = Callable[[Page], bool]


@dataclass(frozen=True)
class Query:
    matches: Predicate
    order: list[tuple[str, bool]]  # (field, descending)
    text_terms: list[str]  # for excerpts and relevance


@dataclass(frozen=True)
class _Token:
    kind: str  # "string", "op", "word"
    text: str

    def keyword(self, *words: str) -> bool:
        return self.kind == "word" and self.text.lower() in words


def _tokens(cql: str) -> list[_Token]:
    tokens, pos = [], 0
    while pos < len(cql):
        if cql[pos:].strip() == "":
            break
        match = _TOKEN.match(cql, pos)
        if not match or match.end() == pos:
            raise CqlError(f"Could not parse cql : {cql} (unexpected character at position {pos})")
        kind = match.lastgroup or "word"
        text = match.group(kind)
        if kind == "string":
            text = re.sub(r"\\(.)", r"\1", text[1:-1])
        tokens.append(_Token(kind, text))
        pos = match.end()
    return tokens


class _Parser:
    def __init__(self, cql: str, site: Site, zone: ZoneInfo) -> None:
        self.cql = cql
        self.tokens = _tokens(cql)
        self.at = 0
        self.site = site
        self.zone = zone
        self.text_terms: list[str] = []

    def error(self, why: str) -> CqlError:
        return CqlError(f"Could not parse cql : {self.cql} ({why})")

    def peek(self) -> _Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise self.error("unexpected end of query")
        self.at += 1
        return token

    def parse(self) -> Query:
        matches: Predicate = lambda page: True  # noqa: E731 - an empty query matches everything
        if self.peek() is not None and not self.peek().keyword("order"):
            matches = self.or_expr()
        order: list[tuple[str, bool]] = []
        if self.peek() is not None:
            if not (self.take().keyword("order") and self.take().keyword("by")):
                raise self.error("expected ORDER BY")
            while True:
                name = self.field_name(self.take())
                descending = False
                if self.peek() is not None and self.peek().keyword("asc", "desc"):
                    descending = self.take().text.lower() == "desc"
                order.append((name, descending))
                if self.peek() is None:
                    break
                if self.take().text != ",":
                    raise self.error("expected ',' between ORDER BY fields")
        return Query(matches, order, self.text_terms)

    def or_expr(self) -> Predicate:
        parts = [self.and_expr()]
        while self.peek() is not None and self.peek().keyword("or"):
            self.take()
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else (lambda page: any(p(page) for p in parts))

    def and_expr(self) -> Predicate:
        parts = [self.not_expr()]
        while self.peek() is not None and self.peek().keyword("and"):
            self.take()
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else (lambda page: all(p(page) for p in parts))

    def not_expr(self) -> Predicate:
        if self.peek() is not None and self.peek().keyword("not"):
            self.take()
            inner = self.not_expr()
            return lambda page: not inner(page)
        if self.peek() is not None and self.peek().text == "(" and self.peek().kind == "op":
            self.take()
            inner = self.or_expr()
            if self.take().text != ")":
                raise self.error("expected ')'")
            return inner
        return self.clause()

    def clause(self) -> Predicate:
        name = self.field_name(self.take())
        token = self.take()
        if token.keyword("not") or token.keyword("in"):
            negate = token.keyword("not")
            if negate and not self.take().keyword("in"):
                raise self.error("expected IN after NOT")
            values = self.value_list()
            test = _field(name, "=", values[0], self)  # validates the field
            tests = [test, *(_field(name, "=", v, self) for v in values[1:])]
            if negate:
                return lambda page: not any(t(page) for t in tests)
            return lambda page: any(t(page) for t in tests)
        if token.kind != "op" or token.text in "(),":
            raise self.error(f"expected an operator after {name}")
        value = self.take()
        if value.kind == "op":
            raise self.error(f"expected a value after {name} {token.text}")
        return _field(name, token.text, value.text, self)

    def value_list(self) -> list[str]:
        if self.take().text != "(":
            raise self.error("expected '(' after IN")
        values = []
        while True:
            token = self.take()
            if token.kind == "op":
                raise self.error("expected a value in IN (...)")
            values.append(token.text)
            separator = self.take().text
            if separator == ")":
                return values
            if separator != ",":
                raise self.error("expected ',' or ')' in IN (...)")

    def field_name(self, token: _Token) -> str:
        name = token.text.lower()
        name = {"space.key": "space", "lastmodified": "lastmodified", "sitesearch": "sitesearch"}.get(name, name)
        if token.kind != "word" or name not in _FIELDS:
            raise self.error(f"unknown field {token.text!r}")
        return name

    def date(self, text: str) -> datetime:
        match = _DATE.match(text.strip())
        if not match:
            raise self.error(f"invalid date {text!r}, expected \"yyyy-MM-dd HH:mm\" or \"yyyy/MM/dd\"")
        year, month, day, hour, minute = (int(g) if g else 0 for g in match.groups())
        return datetime(year, month, day, hour, minute, tzinfo=self.zone)


_FIELDS = {"type", "space", "id", "title", "ancestor", "parent", "label", "lastmodified", "created", "text", "sitesearch"}
_COMPARE: dict[str, Callable[[object, object], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _field(name: str, op: str, value: str, parser: _Parser) -> Predicate:
    site = parser.site
    if name in ("lastmodified", "created"):
        if op not in _COMPARE:
            raise parser.error(f"operator {op} does not apply to dates")
        when = parser.date(value)
        compare = _COMPARE[op]
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
    return _Parser(cql, site, ZoneInfo(time_zone)).parse()


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
