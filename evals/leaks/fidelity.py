"""The leak suite's categories for what Confluence, Jira and Slack do beyond a page tree: every
Jira issue as every principal, restricted comments, every spelling of a link, identities that
collide, a restriction that takes a large subtree from the sync account, the time a hidden id
costs against a missing one, and who reads what the Slack bot posts.

Each is judged against the source's own word — the emulator's per-user JQL answers, the site's
permissions, the channels' readers — never against what the service itself stored.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.references import UNRESOLVED, references
from evals.leaks import timing
from evals.leaks.report import Verdict, access_verdict, refusal_verdict

if TYPE_CHECKING:
    from evals.leaks.suite import Actor, LeakSuite

MISSING_ISSUE = "issue:HIVE-99999999"
MISSING_IMAGE = "image:att99999999"
MISSING_ENTITY = "Nosuchentity Anywhere"
TIMED_TOOLS = ("fetch", "related", "get_ancestors", "fetch_image", "resolve_path", "explore")


@dataclass(frozen=True)
class JiraTruth:
    """What the Jira site says: every issue, and for each login the issues its own JQL search
    returns; the text of each issue's comments restricted to a role or group, each such comment
    by id with its issue and text, and for each login the ones Jira shows it with its issue."""

    issues: frozenset[str]
    visible: Mapping[str, frozenset[str]]
    restricted_comments: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    comments: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # comment:ID -> (issue, text)
    comment_readers: Mapping[str, frozenset[str]] = field(default_factory=dict)  # login -> comment ids


@dataclass(frozen=True)
class LinkPlant:
    """A page whose text links, in every spelling, to the ``targets``; ``phrase`` finds it."""

    page: str
    targets: frozenset[str]
    phrase: str


@dataclass(frozen=True)
class Channel:
    """A Slack conversation as the suite sees it: the logins who may read what is posted there, or
    None when the bot must never post there (shared with another organisation, a guest in it)."""

    id: str
    kind: str
    readers: frozenset[str] | None


@dataclass(frozen=True)
class SlackAudience:
    """The bot's decision (``posts``: may an answer showing these ids go to this channel?) over
    the real OpenFGA, and the channels to ask about."""

    posts: Callable[[str, Sequence[str]], Awaitable[bool]]
    channels: Sequence[Channel]


@dataclass(frozen=True)
class Timed:
    """Ids a principal may not see, per tool, to time against missing ones: pages, images, title
    paths and entity names."""

    pages: Sequence[str]
    images: Sequence[str]
    paths: Sequence[str]
    entities: Sequence[str]


class FidelityProbes:
    """Mixed into :class:`evals.leaks.suite.LeakSuite`: ``self`` is the suite."""

    # -- Jira ----------------------------------------------------------------------------------

    async def probe_jira_issues(self: LeakSuite) -> None:
        """Every issue (and one that does not exist) as every principal: fetched exactly when the
        emulator's JQL search shows it to them."""
        jira = self._jira()
        for actor in self.actors:
            visible = self.visible_issues(actor)
            for issue in sorted(jira.issues | {MISSING_ISSUE}):
                answer = await self.call(actor, "fetch", id=issue)
                self.judge("jira_issues", actor, f"fetch {issue}", access_verdict(issue in visible, answer, issue, self.refusal(actor)), answer)

    async def probe_jira_comments(self: LeakSuite) -> None:
        """A restricted comment is a document of its own: fetched exactly by those Jira shows it
        to (with its issue), and no word of it reaches anyone else, through its issue (fetch) or
        search (snippets, entities, relations)."""
        jira = self._jira()
        for actor in self.actors:
            visible = self.visible_issues(actor)
            readable = self.visible_comments(actor)
            for issue, texts in sorted(jira.restricted_comments.items()):
                if issue not in visible:
                    continue  # that the issue is hidden is jira_issues' question
                answer = await self.call(actor, "fetch", id=issue)
                verdict: Verdict = "false_denial" if answer.error else "leak" if _quotes(answer.raw, texts) else "ok"
                self.judge("jira_comments", actor, f"fetch {issue}", verdict, answer)
            for comment in sorted(jira.comments):
                answer = await self.call(actor, "fetch", id=comment)
                self.judge("jira_comments", actor, f"fetch {comment}", access_verdict(comment in readable, answer, comment, self.refusal(actor)), answer)
            for comment in sorted(jira.comments)[:5]:
                text = jira.comments[comment][1]
                found = await self.call(actor, "search", query=text, top_k=10, response_format="detailed")
                # Review notes share their wording but name their issue: a note is quoted whole or not at all.
                others = [t for c, (_, t) in jira.comments.items() if c not in readable]
                self.judge("jira_comments", actor, f"search {text[:40]!r}", "leak" if any(t in found.raw for t in others) else "ok", found)

    # -- links ---------------------------------------------------------------------------------

    async def probe_link_forms(self: LeakSuite) -> None:
        """A page linking to hidden pages and issues in every spelling: each link to something the
        actor may not see loses its target (the generic reference scan of every answer finds any
        left), and each to something they may see keeps it."""
        plant = self.target.links
        assert plant is not None
        for actor in self.actors:
            visible = self.visible(actor)
            if plant.page not in visible:
                continue
            answer = await self.call(actor, "fetch", id=plant.page)
            kept = references((answer.data or {}).get("markdown", ""))
            lost = sorted(t for t in plant.targets if t in visible and t not in kept)
            verdict: Verdict = "false_denial" if answer.error or lost else "leak" if UNRESOLVED in kept else "ok"
            self.judge("link_forms", actor, f"fetch {plant.page}" + (f": lost {lost[:3]}" if lost else ""), verdict, answer)
            found = await self.call(actor, "search", query=plant.phrase, top_k=10, response_format="detailed")
            self.judge("link_forms", actor, f"search {plant.phrase!r}", "leak" if UNRESOLVED in references(found.raw) else "ok", found)

    # -- identity ------------------------------------------------------------------------------

    async def probe_identity(self: LeakSuite) -> None:
        """Users whose names collide with ids (a Data Center username with a space, and one named
        like that user's Wayfinder id): each sees what the site shows their own account, never the
        other's pages."""
        for actor in self.target.identity:
            visible = self.visible(actor)
            for page in sorted(self._all_pages):
                answer = await self.call(actor, "fetch", id=page)
                self.judge("identity", actor, f"fetch {page}", access_verdict(page in visible, answer, page, self.refusal(actor)), answer)

    # -- revocation that never waits -----------------------------------------------------------

    async def probe_revocation_stall(self: LeakSuite) -> None:
        """The source restricts a large subtree to nobody the suite acts as, leaving the sync
        account out; one sync later every page of it is hidden from every principal, its content
        kept (not purged); lifted again, the pages come back."""
        root = self.target.stall_root
        assert root is not None
        locked, deleted = await self.env.lock_subtree(root)
        subtree = sorted(locked)
        if deleted or not subtree:
            self.report.record("revocation_stall", "error", f"the sync purged {len(deleted)} pages or hid none: {sorted(deleted)[:3]}")
        try:
            for actor in self.actors:
                for page in subtree:
                    answer = await self.call(actor, "fetch", id=page)
                    self.judge("revocation_stall", actor, f"locked: fetch {page}", refusal_verdict(answer, self.refusal(actor)), answer)
        finally:
            await self.env.unlock_subtree(root)
        for actor in self.actors:
            for page in [p for p in subtree if p in self.visible(actor)][:5]:
                answer = await self.call(actor, "fetch", id=page)
                self.judge("revocation_stall", actor, f"unlocked: fetch {page}", "false_denial" if answer.error else "ok", answer)

    # -- timing --------------------------------------------------------------------------------

    async def probe_timing(self: LeakSuite) -> None:
        """Per tool, ``timing_calls`` calls with ids the actor may not see and as many with ids
        that exist nowhere, interleaved: every answer a byte-identical not_found, and the two
        samples of times not told apart (two-sample Kolmogorov–Smirnov, p ≥ 0.01)."""
        timed = self.target.timed
        assert timed is not None
        actor = next(a for a in self.actors if a.live and a.principal.agent is None and a.name == self.target.timing_actor)
        calls: dict[str, tuple[Sequence[dict[str, Any]], dict[str, Any]]] = {
            "fetch": ([{"id": p} for p in timed.pages], {"id": "page:99999999"}),
            "related": ([{"id": p} for p in timed.pages], {"id": "page:99999999"}),
            "get_ancestors": ([{"id": p} for p in timed.pages], {"id": "page:99999999"}),
            "fetch_image": ([{"id": i} for i in timed.images], {"id": MISSING_IMAGE}),
            "resolve_path": ([{"path": p} for p in timed.paths], {"path": "HIVE/Nosuchpage Anywhere"}),
            "explore": ([{"entity": e, "hops": 1, "limit": 5} for e in timed.entities], {"entity": MISSING_ENTITY, "hops": 1, "limit": 5}),
        }
        for tool in TIMED_TOOLS:
            hidden_args, missing_args = calls[tool]
            if not hidden_args:
                self.report.record("timing", "error", f"{tool}: no hidden id to time")
                continue
            await self.call(actor, tool, **missing_args)  # warm: the first call of a tool pays for more than the question
            hidden, missing = [], []
            for n in range(self.target.timing_calls):
                for sample, args in ((hidden, hidden_args[n % len(hidden_args)]), (missing, missing_args)):
                    started = time.perf_counter()
                    answer = await self.call(actor, tool, **args)
                    sample.append(time.perf_counter() - started)
                    verdict: Verdict = "ok" if answer.error is not None and answer.error.startswith("not_found:") else "leak"
                    self.judge("timing", actor, f"{tool} {args}", verdict, answer)
            p = timing.ks_p_value(hidden, missing)
            median = sorted(hidden)[len(hidden) // 2] * 1000, sorted(missing)[len(missing) // 2] * 1000
            what = f"{tool}: hidden vs missing p={p:.4f}, medians {median[0]:.1f} / {median[1]:.1f} ms"
            self.report.record("timing", "leak" if p < timing.LEVEL else "ok", f"{actor.name}: {what}")
            self.report.timing[tool] = {"p_value": round(p, 4), "hidden_median_ms": round(median[0], 2), "missing_median_ms": round(median[1], 2)}

    # -- Slack ---------------------------------------------------------------------------------

    async def probe_slack_channels(self: LeakSuite) -> None:
        """The bot's decision for every kind of conversation and several answers: posted exactly
        when every reader (a public channel's whole workspace) may see everything it shows; never
        where a reader is a guest or of another organisation."""
        slack = self.target.slack
        assert slack is not None
        shown = self._answers_to_post()
        for channel in slack.channels:
            for cited in shown:
                may = channel.readers is not None and all(set(cited) <= self.visible_to(login) for login in channel.readers)
                posted = await slack.posts(channel.id, cited)
                verdict: Verdict = "ok" if posted == may else "leak" if posted else "false_denial"
                self.report.record("slack_channels", verdict, f"{channel.kind} {channel.id} showing {list(cited)[:3]}: posted={posted}, may={may}")

    # -- plumbing ------------------------------------------------------------------------------

    def _jira(self: LeakSuite) -> JiraTruth:
        assert self.target.jira is not None
        return self.target.jira

    def visible_issues(self: LeakSuite, actor: Actor) -> set[str]:
        jira = self.target.jira
        return set(jira.visible.get(actor.login, ())) if jira is not None and actor.live else set()

    def visible_comments(self: LeakSuite, actor: Actor) -> set[str]:
        """The restricted comments Jira shows ``actor`` with their issues."""
        jira = self.target.jira
        return set(jira.comment_readers.get(actor.login, ())) if jira is not None and actor.live else set()

    def visible_to(self: LeakSuite, login: str) -> set[str]:
        jira = self.target.jira
        return self.target.oracle.visible(login) | (set(jira.visible.get(login, ())) | set(jira.comment_readers.get(login, ())) if jira else set())

    def _answers_to_post(self: LeakSuite) -> list[tuple[str, ...]]:
        """Answers of one, two and three objects: open, restricted to committers, to bob alone,
        and issues on and off a security level."""
        everyone = set.intersection(*(self.visible_to(a.login) for a in self.actors if a.principal.agent is None))
        pages = sorted(p for p in self._all_pages)
        open_pages = [p for p in pages if p in everyone][:2]
        others = [p for p in pages if p not in everyone]
        picks = [others[0], others[-1]] if others else []
        issues = sorted(self.target.jira.issues) if self.target.jira else []
        open_issues = [i for i in issues if i in everyone][:1]
        secured = [i for i in issues if i not in everyone][:1]
        answers = [tuple(open_pages), *((p,) for p in picks), (*open_pages[:1], *picks[:1]), tuple(open_issues), tuple(secured)]
        return [answer for answer in answers if answer]


def _quotes(raw: str, texts: Sequence[str]) -> bool:
    """Does an answer carry any of ``texts`` (or their distinctive tail)?"""
    return any(text in raw or text[len(text) // 2 :] in raw for text in texts)
