"""The leak suite: act as each principal through a real MCP client over HTTP and count, per
category, probes tried, leaks and false denials against an oracle built from the source.

Every answer is also scanned whole — structured fields and text — for the numeric id of any page
the actor may not see and for any canary planted in such a page; a hit is a leak in the
category of the probe that got the answer.

Categories: ``fetch`` and ``list_children`` (every page, every actor), ``forbidden_vs_missing``
(byte comparison), ``hidden_ids`` (searches for visible pages that link to hidden ones),
``canary`` (hidden canary as the query equals a token found nowhere), ``entity_pivot`` (search and
explore from entities that hidden pages support),
``session`` (one user's token on another's MCP session), ``revocation`` and ``openfga_down``
(last: it stops the authorization engine). :mod:`evals.leaks.fidelity` adds ``jira_issues``,
``jira_comments``, ``link_forms``, ``identity``, ``timing``, ``slack_channels`` and
``revocation_stall``, run where the target holds what they need (Jira, a planted link page, ...).

Every answer is also read for references (:mod:`core.references`: typed ids, Confluence and Jira
URLs, tiny links): one to a page or issue the actor may not see is a leak too.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

import httpx
from fastmcp import Client

from authz import grants
from authz.base import TupleStore
from core.models import Permissions, Principal
from core.references import references
from evals.leaks.canaries import Canary
from evals.leaks.fidelity import FidelityProbes, JiraTruth, LinkPlant, SlackAudience, Timed
from evals.leaks.oracle import Oracle
from evals.leaks.report import Report, Verdict, access_verdict, refusal_verdict
from retrievers.explore import MAX_START_EVIDENCE

MISSING_PAGE = "page:99999999"
MISSING_SPACE = "space:NOSUCHSPACE"
UNKNOWN = "unknown"  # evidence for an item the index's record does not hold
MISSING_ENTITY = "Nosuchentity Anywhere"
PAGE_SIZE = 50
MAX_PIVOTS = 25
GRANT_TTL = timedelta(hours=2)
SHORT_GRANT = timedelta(seconds=5)  # long enough for one call on a loaded machine
DEADLINE_SLACK_S = 2.0
CATEGORIES = (
    "fetch",
    "list_children",
    "forbidden_vs_missing",
    "hidden_ids",
    "canary",
    "entity_pivot",
    "jira_issues",
    "jira_comments",
    "link_forms",
    "identity",
    "slack_channels",
    "timing",
    "session",
    "revocation",
    "revocation_stall",
    "openfga_down",
)
# The categories a target must hold something for, and what (a field of Target).
NEEDS = {
    "jira_issues": "jira", "jira_comments": "jira", "link_forms": "links", "identity": "identity", "slack_channels": "slack",
    "timing": "timed", "revocation_stall": "stall_root",
}
_NUMBER = re.compile(r"(?<![\d])\d{5,20}(?![\d])")
_COMMENT = re.compile(r"\bcomment:(\d+)\b")  # a restricted Jira comment's id, as every answer spells it


@dataclass(frozen=True)
class Actor:
    """Someone the suite acts as. An agent's grant is made live, or left expired, by the suite.
    ``username`` is the name the site knows the user by, when it is not the principal's id (a name
    with a space): tokens name the user by it, and the oracle answers for it."""

    name: str
    principal: Principal
    grant: Literal["none", "live", "expired"] = "none"
    username: str | None = None

    @property
    def live(self) -> bool:
        return self.principal.agent is None or self.grant == "live"

    @property
    def login(self) -> str:
        return self.username or self.principal.user


ACTORS = (
    Actor("alice", Principal(user="alice")),
    Actor("bob", Principal(user="bob")),
    Actor("carol", Principal(user="carol")),
    Actor("digest-bot for alice", Principal(user="alice", agent="digest-bot", task="leak-suite-alice"), "live"),
    Actor("slack-bot for bob, expired", Principal(user="bob", agent="slack-bot", task="leak-suite-bob"), "expired"),
)
# Used by the revocation probes only: its grant is made, let expire and revoked during the run.
EXPIRING = Actor("digest-bot for bob, expiring", Principal(user="bob", agent="digest-bot", task="leak-suite-expiring"))


class Environment(Protocol):
    """What the suite may change: tuples as the index pipeline writes them, and the engine itself."""

    @property
    def store(self) -> TupleStore: ...

    async def apply(self, permissions: Permissions) -> None:
        """Synchronise OpenFGA with ``permissions`` the way an index run does."""
        ...

    async def stop_authorization(self) -> None:
        """Stop OpenFGA (the last category)."""
        ...

    async def lock_subtree(self, root: str) -> tuple[list[str], list[str]]:
        """Restrict ``root`` at the source to nobody the suite acts as, the sync account left
        out, and sync; (the pages hidden, the pages purged)."""
        ...

    async def unlock_subtree(self, root: str) -> None:
        """Lift that restriction and sync."""
        ...


@dataclass(frozen=True)
class Target:
    url: str
    oracle: Oracle
    tokens: dict[str, str]  # actor name → bearer token
    canaries: Sequence[Canary] = ()
    evidence: dict[str, frozenset[str]] = field(default_factory=dict)  # entity or relation → supporting pages
    deadline_s: float = 3.0
    jira: JiraTruth | None = None
    links: LinkPlant | None = None
    identity: Sequence[Actor] = ()  # users whose names collide with ids (their tokens are in ``tokens``)
    slack: SlackAudience | None = None
    timed: Timed | None = None
    timing_actor: str = "bob"
    timing_calls: int = 200  # per tool and kind of id
    stall_root: str | None = None  # a page whose subtree revocation_stall takes from the sync account


@dataclass(frozen=True)
class Answer:
    error: str | None
    data: dict[str, Any] | None
    raw: str  # the whole result as JSON: compared byte for byte and scanned
    seconds: float


async def call_tool(client: Client, tool: str, arguments: dict[str, Any]) -> Answer:
    """One tool call on an open client, as an :class:`Answer` (a refusal is an answer too)."""
    started = time.monotonic()
    result = await client.call_tool_mcp(tool, arguments)
    seconds = time.monotonic() - started
    raw = json.dumps(
        {"isError": result.is_error, "content": [c.model_dump() for c in result.content], "structured": result.structured_content},
        sort_keys=True,
    )
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        return Answer(text, None, raw, seconds)
    return Answer(None, result.structured_content or {}, raw, seconds)


def exposed(answer: Answer, hidden: set[str], canaries: Sequence[Canary] = ()) -> list[str]:
    """The numeric ids of ``hidden`` pages, the canaries planted in them, the ids of hidden
    restricted comments, and every reference (in any spelling :mod:`core.references` reads) to a
    hidden page or issue, anywhere in an answer."""
    hidden_numbers = {p.removeprefix("page:") for p in hidden if p.startswith("page:")}
    found = sorted(n for n in set(_NUMBER.findall(answer.raw)) if n in hidden_numbers)
    found += [c.phrase for c in canaries if c.page_id in hidden and c.phrase in answer.raw]
    found += sorted(f"comment:{n}" for n in set(_COMMENT.findall(answer.raw)) if f"comment:{n}" in hidden)
    found += sorted(ref for ref in references(answer.raw) if ref in hidden and ref.removeprefix("page:") not in found)
    return found


def explorable(name: str, visible: Set[str], evidence: Mapping[str, Set[str]]) -> bool:
    """Whether explore may answer for the entity ``name``: every page behind it (by the index's
    record) is visible, and few enough for one request to check."""
    docs = evidence.get(name, {UNKNOWN})
    return docs <= visible and len(docs) <= MAX_START_EVIDENCE


def explored_beyond(answer: Answer, visible: Set[str], evidence: Mapping[str, Set[str]]) -> list[str]:
    """The entities and relations of an explore answer that stand on a page outside ``visible``,
    by the evidence the answer claims or by the index's own record (an item it does not know
    counts)."""
    data = answer.data or {}
    shown = [(e["name"], e["evidence"]) for e in [data.get("entity", {}), *data.get("entities", [])]]
    shown += [(f"{r['source']} -> {r['target']}", r["evidence"]) for r in data.get("relations", [])]
    return [item for item, claimed in shown if not set(claimed) <= visible or not evidence.get(item, {UNKNOWN}) <= visible]


class LeakSuite(FidelityProbes):
    def __init__(self, target: Target, environment: Environment, actors: Sequence[Actor] = ACTORS) -> None:
        self.target = target
        self.env = environment
        self.actors = list(actors)
        self.report = Report(actors=[a.name for a in [*self.actors, *target.identity]], pages=len(target.oracle.pages))
        self._clients: dict[str, Client] = {}
        self._all_pages = {p.id for p in target.oracle.pages}
        self._known = self._all_pages | set(target.jira.issues if target.jira else ()) | set(target.jira.comments if target.jira else ())
        self._permissions = target.oracle.permissions

    # -- plumbing -------------------------------------------------------------------------------

    def visible(self, actor: Actor, oracle: Oracle | None = None) -> set[str]:
        """Typed ids of every space, page, issue and restricted comment the source shows ``actor``:
        an entity or a snippet standing on an issue or a comment is judged by its readers."""
        if not actor.live:
            return set()
        return (oracle or self.target.oracle).visible(actor.login) | self.visible_issues(actor) | self.visible_comments(actor)

    async def call(self, actor: Actor, tool: str, **arguments: Any) -> Answer:
        client = self._clients.get(actor.name)
        if client is None:
            client = Client(self.target.url, auth=self.target.tokens[actor.name])
            await client.__aenter__()
            self._clients[actor.name] = client
        return await call_tool(client, tool, arguments)

    @staticmethod
    def refusal(actor: Actor) -> str:
        """How a request that may show nothing must fail: not found, or for an agent without a
        live grant, unauthenticated."""
        return "not_found:" if actor.live else "unauthenticated:"

    def exposed(self, answer: Answer, visible: set[str]) -> list[str]:
        return exposed(answer, self._known - visible, self.target.canaries)

    def judge(self, category: str, actor: Actor, what: str, verdict: Verdict, answer: Answer | None = None) -> None:
        """Record a probe; a clean verdict still becomes a leak if the answer exposes anything."""
        if answer is not None and verdict != "leak":
            exposed = self.exposed(answer, self.visible(actor))
            if exposed:
                verdict, what = "leak", f"{what} exposed {exposed[:3]}"
        self.report.record(category, verdict, f"{actor.name}: {what}")

    # -- the run --------------------------------------------------------------------------------

    def categories(self) -> list[str]:
        """Every category this target holds what it needs for."""
        return [c for c in CATEGORIES if c not in NEEDS or getattr(self.target, NEEDS[c])]

    async def run(self, categories: Iterable[str] | None = None) -> Report:
        wanted = list(self.categories() if categories is None else categories)
        unknown = set(wanted) - set(CATEGORIES)
        if unknown:
            raise ValueError(f"unknown leak-suite categories: {sorted(unknown)}")
        lacking = [c for c in wanted if c in NEEDS and not getattr(self.target, NEEDS[c])]
        if lacking:
            raise ValueError(f"the target holds nothing for the leak-suite categories {lacking}")
        started = time.monotonic()
        await self._prepare_grants()
        try:
            for category in CATEGORIES:  # always in this order: openfga_down stops the engine
                if category in wanted:
                    await getattr(self, f"probe_{category}")()
        finally:
            for client in self._clients.values():
                await client.__aexit__(None, None, None)
            self._clients.clear()
        self.report.seconds = time.monotonic() - started
        return self.report

    async def _prepare_grants(self) -> None:
        for actor in [*self.actors, EXPIRING]:
            p = actor.principal
            if p.agent is None or p.task is None:
                continue
            await grants.revoke(self.env.store, p.user, p.agent, p.task)
            if actor.grant == "live":
                await grants.grant(self.env.store, p.user, p.agent, p.task, GRANT_TTL)
            elif actor.grant == "expired":
                await grants.grant(self.env.store, p.user, p.agent, p.task, timedelta(seconds=1))
        if any(a.grant == "expired" for a in self.actors):
            await asyncio.sleep(1.2)  # let the short grants run out

    # -- categories -----------------------------------------------------------------------------

    async def probe_fetch(self) -> None:
        for actor in self.actors:
            visible = self.visible(actor)
            for page in sorted(self._all_pages | {MISSING_PAGE}):
                answer = await self.call(actor, "fetch", id=page)
                verdict = access_verdict(page in visible, answer, page, self.refusal(actor))
                self.judge("fetch", actor, f"fetch {page}", verdict, answer)

    async def probe_list_children(self) -> None:
        oracle = self.target.oracle
        nodes = [s.id for s in oracle.spaces] + sorted(self._all_pages)
        for actor in self.actors:
            visible = self.visible(actor)
            for node in nodes:
                returned, answer = await self._all_children(actor, node)
                if node not in visible:
                    verdict: Verdict = "leak" if returned else refusal_verdict(answer, self.refusal(actor))
                else:
                    expected = [c for c in oracle.children(node) if c in visible]
                    if answer.error:
                        verdict = "false_denial"
                    elif set(returned) - set(expected):
                        verdict = "leak"
                    elif returned != expected:
                        verdict = "false_denial"
                    else:
                        verdict = "ok"
                self.judge("list_children", actor, f"list_children {node}", verdict, answer)

    async def _all_children(self, actor: Actor, node: str) -> tuple[list[str], Answer]:
        returned: list[str] = []
        cursor = None
        while True:
            args: dict[str, Any] = {"id": node, "limit": PAGE_SIZE} | ({"cursor": cursor} if cursor else {})
            answer = await self.call(actor, "list_children", **args)
            if answer.error or answer.data is None:
                return returned, answer
            returned += [child["id"] for child in answer.data["children"]]
            cursor = answer.data.get("next_cursor")
            if not cursor:
                return returned, answer

    async def probe_forbidden_vs_missing(self) -> None:
        """Every tool that takes an id, and search's space filter: a hidden object and a missing
        one give the same bytes."""
        pairs = [("fetch", {}), ("fetch", {"section": "intro"}), ("list_children", {}), ("list_children", {"limit": 1})]
        for actor in self.actors:
            visible = self.visible(actor)
            for page in sorted(self._all_pages - visible):
                for tool, extra in pairs:
                    await self._compare(actor, tool, {"id": page, **extra}, {"id": MISSING_PAGE, **extra})
            for space in sorted(s.id for s in self.target.oracle.spaces if s.id not in visible):
                await self._compare(actor, "list_children", {"id": space}, {"id": MISSING_SPACE})
                key, missing_key = space.removeprefix("space:"), MISSING_SPACE.removeprefix("space:")
                await self._compare(actor, "search", {"query": "HiveServer2", "spaces": [key]}, {"query": "HiveServer2", "spaces": [missing_key]})

    async def _compare(self, actor: Actor, tool: str, hidden: dict[str, Any], missing: dict[str, Any]) -> None:
        forbidden = await self.call(actor, tool, **hidden)
        absent = await self.call(actor, tool, **missing)
        verdict: Verdict = "ok" if forbidden.raw == absent.raw else "leak"
        self.judge("forbidden_vs_missing", actor, f"{tool} {hidden} vs {missing}", verdict, forbidden)

    async def probe_hidden_ids(self) -> None:
        """Search for the visible pages that link to hidden ones, by title: snippets, breadcrumbs
        and entities must name no hidden page. A probe counts only where it tested something: the
        linking page came back to someone who may see it, or the actor may not see it at all."""
        linking = [p for p in self.target.oracle.pages if references(p.markdown)]
        for actor in self.actors:
            visible = self.visible(actor)
            for page in sorted(linking, key=lambda p: p.page_id):
                answer = await self.call(actor, "search", query=page.title, top_k=10, response_format="detailed")
                hits = [h["id"] for h in (answer.data or {}).get("hits", [])]
                if page.id in visible and page.id not in hits:
                    continue  # the search did not bring the page back: nothing was tested
                verdict: Verdict = "ok" if answer.error is None or not actor.live else "false_denial"
                self.judge("hidden_ids", actor, f"search {page.title!r}", verdict, answer)

    async def probe_canary(self) -> None:
        for canary in self.target.canaries:
            for actor in self.actors:
                found = await self.call(actor, "search", query=canary.phrase, top_k=10, response_format="detailed")
                if canary.page_id in self.visible(actor):
                    hits = [h["id"] for h in (found.data or {}).get("hits", [])]
                    verdict: Verdict = "ok" if canary.page_id in hits else "false_denial"
                    self.judge("canary", actor, f"search own canary {canary.phrase}", verdict, found)
                    continue
                control = await self.call(actor, "search", query=canary.control, top_k=10, response_format="detailed")
                same = found.raw == control.raw
                what = f"search hidden canary {canary.phrase} vs control {canary.control}"
                if not same:
                    what += f": {_gist(found)} vs {_gist(control)}"
                self.judge("canary", actor, what, "ok" if same else "leak", found)

    async def probe_entity_pivot(self) -> None:
        evidence = self.target.evidence
        restricted = set().union(*(self._restricted_for(a) for a in self.actors if a.live))
        entities = {n: docs for n, docs in evidence.items() if " -> " not in n}
        only_hidden = sorted(n for n, docs in entities.items() if docs and docs <= restricted)[:MAX_PIVOTS]
        shared = sorted(n for n, docs in entities.items() if docs & restricted and docs - restricted)[:MAX_PIVOTS]
        for actor in self.actors:
            visible = self.visible(actor)
            for name in only_hidden + shared:
                answer = await self.call(actor, "search", query=name, top_k=10, response_format="detailed")
                items = (answer.data or {}).get("entities", []) + (answer.data or {}).get("relations", [])
                # Judged against the index's own record of what supports each item, not against
                # the evidence the answer claims; an item the record does not know is a leak too.
                bad = [
                    item["name"]
                    for item in items
                    if not set(item["evidence"]) <= visible or not evidence.get(item["name"], {UNKNOWN}) <= visible
                ]
                verdict: Verdict = "leak" if bad else "ok"
                self.judge("entity_pivot", actor, f"search {name!r} showed {bad[:3]}", verdict, answer)
                await self._explore(actor, name, visible)

    async def _explore(self, actor: Actor, name: str, visible: set[str]) -> None:
        """explore from the entity, two hops out: everything it shows stands on visible pages only
        (by the index's record), and an entity the actor may not explore is refused exactly as one
        that does not exist."""
        evidence = self.target.evidence
        walked = await self.call(actor, "explore", entity=name, hops=2, limit=50)
        if walked.error is not None:
            may_see = actor.live and explorable(name, visible, evidence)
            absent = await self.call(actor, "explore", entity=MISSING_ENTITY, hops=2, limit=50)
            verdict: Verdict = "false_denial" if may_see else "ok" if walked.raw == absent.raw else "leak"
            self.judge("entity_pivot", actor, f"explore {name!r} refused: {walked.error[:80]}", verdict, walked)
            return
        bad = explored_beyond(walked, visible, evidence)
        self.judge("entity_pivot", actor, f"explore {name!r} showed {bad[:3]}", "leak" if bad else "ok", walked)

    async def probe_session(self) -> None:
        """Bob's token on alice's MCP session id is refused, or acts as bob, never as alice."""
        live = [a for a in self.actors if a.live]
        async with httpx.AsyncClient(timeout=30) as http:
            for owner in live:
                session = await _open_session(http, self.target.url, self.target.tokens[owner.name])
                for intruder in live:
                    if intruder is owner:
                        continue
                    pages = [p for p in self.visible(owner) - self.visible(intruder) if p.startswith("page:")][:1]
                    for page in pages or [MISSING_PAGE]:
                        status, body = await _call_on_session(http, self.target.url, self.target.tokens[intruder.name], session, page)
                        answer = Answer(None, None, body, 0.0)
                        leaked = status == 200 and '"isError":false' in body.replace(" ", "")
                        what = f"{intruder.name}'s token on {owner.name}'s session fetching {page} -> HTTP {status}"
                        self.judge("session", intruder, what, "leak" if leaked else "ok", answer)

    async def probe_revocation(self) -> None:
        await self._revoke_membership()
        await self._add_restriction()
        await self._expire_and_revoke_grant()

    async def _revoke_membership(self) -> None:
        """Take bob out of every group: on the next request he sees nothing; restored, he sees again."""
        bob = next(a for a in self.actors if a.name == "bob")
        page = self._some_visible_page(bob)
        members = {
            group: tuple(m for m in found if m != "user:bob") for group, found in self._permissions.group_members.items()
        }
        await self._under(self._permissions.model_copy(update={"group_members": members}), bob, page, "removed from groups")

    async def _add_restriction(self) -> None:
        """Restrict a page bob sees to alice: bob is denied next request, alice is not."""
        bob = next(a for a in self.actors if a.name == "bob")
        page = self._some_visible_page(bob)
        restrictions = dict(self._permissions.page_restrictions) | {page.removeprefix("page:"): ("user:alice",)}
        await self._under(self._permissions.model_copy(update={"page_restrictions": restrictions}), bob, page, "page restricted")

    async def _under(self, changed: Permissions, actor: Actor, page: str, what: str) -> None:
        """Seen before the change, refused on the first request after it, seen again once undone."""
        before = await self.call(actor, "fetch", id=page)
        self.judge("revocation", actor, f"before: fetch {page}", "false_denial" if before.error else "ok", before)
        await self.env.apply(changed)
        try:
            denied = await self.call(actor, "fetch", id=page)
            self.judge("revocation", actor, f"{what}: fetch {page}", refusal_verdict(denied, "not_found:"), denied)
        finally:
            await self.env.apply(self._permissions)
        restored = await self.call(actor, "fetch", id=page)
        self.judge("revocation", actor, f"restored: fetch {page}", "false_denial" if restored.error else "ok", restored)

    async def _expire_and_revoke_grant(self) -> None:
        p = EXPIRING.principal
        assert p.agent and p.task
        live = Actor(EXPIRING.name, p, "live")
        page = self._some_visible_page(live)
        made = await grants.grant(self.env.store, p.user, p.agent, p.task, SHORT_GRANT)
        before = await self.call(live, "fetch", id=page)
        self.judge("revocation", live, f"short grant: fetch {page}", "false_denial" if before.error else "ok", before)
        await asyncio.sleep(max(0.0, (made.expires_at - datetime.now(UTC)).total_seconds()) + 0.3)
        expired = await self.call(EXPIRING, "fetch", id=page)
        self.judge("revocation", EXPIRING, f"grant expired: fetch {page}", refusal_verdict(expired, "unauthenticated:"), expired)
        await grants.grant(self.env.store, p.user, p.agent, p.task, GRANT_TTL)
        renewed = await self.call(live, "fetch", id=page)
        self.judge("revocation", live, f"grant renewed: fetch {page}", "false_denial" if renewed.error else "ok", renewed)
        await grants.revoke(self.env.store, p.user, p.agent, p.task)
        revoked = await self.call(EXPIRING, "fetch", id=page)
        self.judge("revocation", EXPIRING, f"grant revoked: fetch {page}", refusal_verdict(revoked, "unauthenticated:"), revoked)

    def _restricted_for(self, actor: Actor) -> set[str]:
        """Pages hidden from ``actor`` inside spaces it may view (the ones restrictions hide), and
        the issues Jira hides from it (its security levels)."""
        visible = self.visible(actor)
        pages = {p.id for p in self.target.oracle.pages if f"space:{p.space_key}" in visible and p.id not in visible}
        return pages | (set(self.target.jira.issues) - visible if self.target.jira is not None else set())

    def _some_visible_page(self, actor: Actor) -> str:
        return min(p for p in self.visible(actor) if p.startswith("page:"))

    async def probe_openfga_down(self) -> None:
        await self.env.stop_authorization()
        page = min(p for p in self._all_pages)
        calls: list[tuple[str, dict[str, Any]]] = [
            ("search", {"query": "HiveServer2 configuration"}),
            ("fetch", {"id": page}),
            ("list_spaces", {}),
            ("list_children", {"id": self.target.oracle.spaces[0].id}),
        ]
        limit = self.target.deadline_s + DEADLINE_SLACK_S
        for actor in self.actors:
            for tool, args in calls:
                answer = await self.call(actor, tool, **args)
                if answer.error is None:
                    verdict: Verdict = "leak"  # anything but an error is failing open
                elif not answer.error.startswith("authorization_unavailable:") or answer.seconds > limit:
                    verdict = "error"
                else:
                    verdict = "ok"
                self.judge("openfga_down", actor, f"{tool} -> {answer.error} in {answer.seconds:.1f}s", verdict, answer)


def _gist(answer: Answer) -> str:
    """What a search answered, briefly: the hit ids and entity/relation names, or the error."""
    if answer.error is not None:
        return answer.error
    data = answer.data or {}
    return str([h["id"] for h in data.get("hits", [])] + [g["name"] for g in data.get("entities", []) + data.get("relations", [])])




async def _open_session(http: httpx.AsyncClient, url: str, token: str) -> str:
    response = await http.post(url, json=_INITIALIZE, headers=_headers(token))
    response.raise_for_status()
    session = response.headers["mcp-session-id"]
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=_headers(token, session))
    return session


async def _call_on_session(http: httpx.AsyncClient, url: str, token: str, session: str, page: str) -> tuple[int, str]:
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fetch", "arguments": {"id": page}}}
    response = await http.post(url, json=request, headers=_headers(token, session))
    return response.status_code, response.text


def _headers(token: str, session: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    return headers | ({"Mcp-Session-Id": session} if session else {})


_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "leak-suite", "version": "1"}},
}
