"""The boolean query grammar CQL and JQL share: ``field op value`` clauses (``=``, ``!=``, ``<``,
``<=``, ``>``, ``>=``, ``~``, ``!~``, ``in (...)``, ``not in (...)``) joined by ``AND``, ``OR``,
``NOT`` and parentheses, then ``ORDER BY field [ASC|DESC], ...``. Keywords and field names are
case-insensitive. Each language says which fields exist and what a clause on one means.

Dates are minute-precise (``"yyyy-MM-dd HH:mm"``, ``"yyyy/MM/dd HH:mm"`` or a bare day) and are
read in the querying user's time zone, which is the trap a real sync has to handle.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar
from zoneinfo import ZoneInfo


class QueryError(ValueError):
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

R = TypeVar("R")
Predicate = Callable[[R], bool]


@dataclass(frozen=True)
class Query(Generic[R]):
    matches: Callable[[R], bool]
    order: list[tuple[str, bool]]  # (field, descending)
    text_terms: list[str]  # for excerpts and relevance
    restricted: bool = True  # False for a query of no clause (all, or ORDER BY alone): "unbounded" to Jira Cloud


@dataclass(frozen=True)
class Token:
    kind: str  # "string", "op", "word"
    text: str

    def keyword(self, *words: str) -> bool:
        return self.kind == "word" and self.text.lower() in words


class Parser(Generic[R]):
    """Parses one query. ``clause(name, op, value, parser)`` turns one comparison on a known field
    into a predicate (raising ``parser.error(...)`` when the comparison makes no sense)."""

    def __init__(
        self,
        text: str,
        *,
        fields: set[str],
        clause: Callable[[str, str, str, Parser[R]], Callable[[R], bool]],
        zone: ZoneInfo,
        describe: Callable[[str, str], str],
        aliases: Mapping[str, str] = {},
    ) -> None:
        self.text = text
        self.fields = fields
        self.aliases = aliases
        self.clause_of = clause
        self.zone = zone
        self.describe = describe  # (query, why) -> the service's own wording of the error
        self.tokens = self._tokens(text)
        self.at = 0
        self.text_terms: list[str] = []

    def error(self, why: str) -> QueryError:
        return QueryError(self.describe(self.text, why))

    def _tokens(self, text: str) -> list[Token]:
        tokens, pos = [], 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            match = _TOKEN.match(text, pos)
            if not match or match.end() == pos:
                raise self.error(f"unexpected character at position {pos}")
            kind = match.lastgroup or "word"
            value = match.group(kind)
            if kind == "string":
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            tokens.append(Token(kind, value))
            pos = match.end()
        return tokens

    def peek(self) -> Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            raise self.error("unexpected end of query")
        self.at += 1
        return token

    def parse(self) -> Query[R]:
        matches: Callable[[R], bool] = lambda record: True  # noqa: E731 - an empty query matches everything
        restricted = self.peek() is not None and not self.peek().keyword("order")
        if restricted:
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
        return Query(matches, order, self.text_terms, restricted)

    def or_expr(self) -> Callable[[R], bool]:
        parts = [self.and_expr()]
        while self.peek() is not None and self.peek().keyword("or"):
            self.take()
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else (lambda record: any(p(record) for p in parts))

    def and_expr(self) -> Callable[[R], bool]:
        parts = [self.not_expr()]
        while self.peek() is not None and self.peek().keyword("and"):
            self.take()
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else (lambda record: all(p(record) for p in parts))

    def not_expr(self) -> Callable[[R], bool]:
        if self.peek() is not None and self.peek().keyword("not"):
            self.take()
            inner = self.not_expr()
            return lambda record: not inner(record)
        if self.peek() is not None and self.peek().text == "(" and self.peek().kind == "op":
            self.take()
            inner = self.or_expr()
            if self.take().text != ")":
                raise self.error("expected ')'")
            return inner
        return self.clause()

    def clause(self) -> Callable[[R], bool]:
        name = self.field_name(self.take())
        token = self.take()
        if token.keyword("not") or token.keyword("in"):
            negate = token.keyword("not")
            if negate and not self.take().keyword("in"):
                raise self.error("expected IN after NOT")
            tests = [self.clause_of(name, "=", value, self) for value in self.value_list()]
            if negate:
                return lambda record: not any(t(record) for t in tests)
            return lambda record: any(t(record) for t in tests)
        if token.kind != "op" or token.text in "(),":
            raise self.error(f"expected an operator after {name}")
        value = self.take()
        if value.kind == "op":
            raise self.error(f"expected a value after {name} {token.text}")
        return self.clause_of(name, token.text, value.text, self)

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

    def field_name(self, token: Token) -> str:
        name = token.text.lower()
        name = self.aliases.get(name, name)
        if token.kind != "word" or name not in self.fields:
            raise self.error(f"unknown field {token.text!r}")
        return name

    def date(self, text: str) -> datetime:
        match = _DATE.match(text.strip())
        if not match:
            raise self.error(f"invalid date {text!r}, expected \"yyyy-MM-dd HH:mm\" or \"yyyy/MM/dd\"")
        year, month, day, hour, minute = (int(g) if g else 0 for g in match.groups())
        return datetime(year, month, day, hour, minute, tzinfo=self.zone)


COMPARE: dict[str, Callable[[object, object], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,  # type: ignore[operator]
    "<=": lambda a, b: a <= b,  # type: ignore[operator]
    ">": lambda a, b: a > b,  # type: ignore[operator]
    ">=": lambda a, b: a >= b,  # type: ignore[operator]
}
