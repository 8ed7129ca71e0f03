"""The emulated site's Jira seed: a HIVE project built from the real issue keys the Hive wiki cites.

The wiki (``../shared/corpora/apache-hive-wiki``) mentions 1,792 distinct real ``HIVE-nnnn`` keys.
Each becomes one issue with its real key. Everything else is derived, deterministically, and the
README's data notes say so:

* **Summary and description** come from the wiki sentences that mention the key (the first
  sentence, prefixed with its section heading, is the summary; the description quotes up to three
  mentions and links back to their pages; mentions on further pages are comments). An issue
  repeats only sentences everyone who may read it may read on the wiki too: a design document's
  only in an issue on *Security*, the page restricted to bob's in none.
* **Epics**: one per wiki tree (the root page of the page that mentions the key most), keys
  ``HIVE-90001`` onwards, so they never collide with a real key. Every issue sits under one.
* **Sub-tasks**: for pages that list numbered steps, a story ``Steps of <page>`` (keys from
  ``HIVE-91001``) with one sub-task per step.
* **Types**: Bug when the mentions speak of a bug, fix, error or failure; Story otherwise.
* **Permissions**: the project is browsable by every signed-in user (as ASF's Jira is public).
  Issues mentioned mostly in the design documents (restricted to committers in Confluence) are at
  security level *Security* (the Committers role); those of the contributors' meetings at *Internal*
  (the Developers role, and the issue's reporter). Roles: Developers (hive-users, hive-committers),
  Committers (hive-committers). So carol sees open issues, bob also Internal ones, alice all. The
  sync account is named in both levels and in the Committers role, and is a member of the
  hive-reviewers group, as an administrator grants a real one: Jira exempts no administrator from
  a level or a comment's restriction.
* **Restricted comments**: some open issues carry a comment restricted to the Committers role, or
  to the hive-reviewers group (alice and the sync account; a group no permission of the project
  names), as teams keep review notes out of public view.
* **People and time**: reporters, assignees, statuses and dates from a hash of the key.
* **Links**: keys cited in one sentence relate to each other; "depends on"/"requires" makes the
  later key block the earlier, "duplicate" makes it a duplicate.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from devstack.atlassian.export import DESIGN_DOCS_PAGE, HiveExportSource, page_url
from devstack.atlassian.hive import HISTORY_DAYS, HISTORY_START, SPACE_KEY, SYNC_LOGIN, account_id, slug, stable_hash
from devstack.atlassian.jira import SecurityLevel
from devstack.atlassian.site import Site

PROJECT_KEY = "HIVE"
PROJECT_NAME = "Apache Hive"
MEETINGS_PAGE = "27362087"  # "Development ContributorsMeetings": its issues are Internal
SECURITY_LEVEL, INTERNAL_LEVEL = "10100", "10101"
FIRST_EPIC, FIRST_STEPS = 90001, 91001
MAX_QUOTED = 3  # mentions quoted in a description; the rest become comments
MAX_COMMENTS = 3
MAX_STEP_PAGES = 8
MAX_STEPS = 8
MAX_RELATED_LINKS = 60

REVIEW_NOTE = "Committers' review note on {key}: hold the backport until the follow-up patch lands."
REVIEWERS = "hive-reviewers"  # the group some review notes are restricted to: named by no project permission

_KEY = re.compile(r"\bHIVE-(\d+)\b")
_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)]*)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*)$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[])")
_STEP = re.compile(r"^\s*(\d+)\.\s+(.+)$")
_BUG = re.compile(r"\b(bug|bugs|fix|fixes|fixed|error|errors|fail|fails|failure|exception|wrong)\b", re.I)
_BLOCKS = re.compile(r"\b(depends on|requires|blocked by)\b", re.I)
_DUPLICATE = re.compile(r"\bduplicat", re.I)
_PEOPLE = ("hive-admin", "alice", "bob")


@dataclass
class _Mention:
    page_id: str
    heading: str
    sentence: str


@dataclass
class _Planned:
    key: str
    mentions: list[_Mention] = field(default_factory=list)


async def seed_hive_jira(site: Site, corpus_dir: Path) -> None:
    """Add the HIVE project to a site already seeded with the Hive space (or a slice of it): one
    issue per key the site's pages cite, under epics of their wiki trees."""
    pages = {p.page_id: p for p in await HiveExportSource(corpus_dir).pages(SPACE_KEY) if p.page_id in site.pages}
    roots = {page_id: _root(site, page_id) for page_id in pages}
    jira = site.jira
    sync = account_id(SYNC_LOGIN)
    jira.add_project(
        PROJECT_KEY, PROJECT_NAME, lead=account_id("hive-admin"),
        roles={"Developers": (set(), {"hive-users", "hive-committers"}), "Committers": ({sync}, {"hive-committers"})},
    )
    jira.set_browse(PROJECT_KEY, anyone=True)
    jira.add_level(PROJECT_KEY, SecurityLevel(SECURITY_LEVEL, "Security", users={sync}, roles={"Committers"}))
    site.add_group(REVIEWERS, {account_id("alice"), sync})
    jira.add_level(PROJECT_KEY, SecurityLevel(INTERNAL_LEVEL, "Internal", users={sync}, roles={"Developers"}, reporter=True))

    planned: dict[str, _Planned] = {}
    co_mentions: list[tuple[str, list[str]]] = []  # (sentence, keys), for links
    for page_id in sorted(pages, key=int):
        for mention, keys in _mentions(page_id, pages[page_id].markdown):
            for key in keys:
                planned.setdefault(key, _Planned(key)).mentions.append(mention)
            if len(keys) > 1:
                co_mentions.append((mention.sentence, keys))

    home = {key: Counter(m.page_id for m in plan.mentions).most_common(1)[0][0] for key, plan in planned.items()}
    trees = sorted({roots[page_id] for page_id in home.values()}, key=int)
    epics = {root: f"{PROJECT_KEY}-{FIRST_EPIC + n}" for n, root in enumerate(trees)}
    for root, key in epics.items():
        title = site.pages[root].title
        jira.create_issue(
            PROJECT_KEY, "Epic", title, key=key, by=account_id("hive-admin"), at=_when(key, "created"),
            description=f"Work the wiki tree [{title}|{page_url(root)}] cites.", labels=[slug(title)],
            security_level=_level(root),
        )
    for key in sorted(planned, key=lambda k: int(k.partition("-")[2])):
        plan = planned[key]
        root = roots[home[key]]
        # Only sentences everyone who may read the issue may read on the wiki, too.
        usable = [m for m in plan.mentions if _quotable(site, m.page_id, _level(root))]
        text = " ".join(m.sentence for m in usable)
        quoted = usable[:MAX_QUOTED]
        description = "\n\n".join(f"From [{site.pages[m.page_id].title}|{page_url(m.page_id)}], section {m.heading or 'top'}:\n{{quote}}{m.sentence}{{quote}}" for m in quoted)
        summary = _summary(usable[0]) if usable else f"{key}, cited on a page with restricted access"
        issue = jira.create_issue(
            PROJECT_KEY, "Bug" if _BUG.search(text) else "Story", summary, key=key, parent_key=epics[root],
            by=account_id(_pick(key, "reporter")), assignee=account_id(_pick(key, "assignee")), at=_when(key, "created"),
            description=description, labels=[slug(site.pages[root].title)], security_level=_level(root), status=_status(key),
        )
        later_pages = list(dict.fromkeys(m.page_id for m in usable[MAX_QUOTED:] if m.page_id not in {q.page_id for q in quoted}))
        for number, page_id in enumerate(later_pages[:MAX_COMMENTS]):
            mention = next(m for m in usable if m.page_id == page_id)
            jira.add_comment(key, f"Also cited in [{site.pages[page_id].title}|{page_url(page_id)}]: {mention.sentence}", by=account_id(_pick(key, f"c{number}")), at=issue.created + timedelta(days=number + 1))
        review = _review(key, _level(root))
        if review is not None:
            jira.add_comment(key, REVIEW_NOTE.format(key=key), by=account_id("alice"), at=issue.created + timedelta(days=MAX_COMMENTS + 1), visibility=review)
        issue.updated = max(issue.updated, _when(key, "updated"))
    _steps(site, pages, roots, epics)
    _links(site, co_mentions)


def _mentions(page_id: str, markdown: str) -> Iterable[tuple[_Mention, list[str]]]:
    """Each sentence (heading, table row or code line) citing keys, with its section heading;
    links read as their text, and a key only their target names is added after it."""
    heading = ""
    for line in markdown.splitlines():
        text = _LINK.sub(_link_text, line)
        found = _HEADING.match(text)
        if found:
            heading = found[1].strip()
        if "HIVE-" not in text:
            continue
        if text.lstrip().startswith("|"):
            pieces = ["; ".join(cell.strip() for cell in text.strip().strip("|").split("|") if cell.strip() and set(cell.strip()) != {"-"})]
        else:
            pieces = _SENTENCE.split(text.strip().lstrip("#*+-> `").strip())
        for sentence in pieces:
            keys = list(dict.fromkeys(f"HIVE-{n}" for n in _KEY.findall(sentence)))
            if keys:
                yield _Mention(page_id, heading, " ".join(sentence.split())[:600]), keys


def _link_text(link: re.Match[str]) -> str:
    cited = [key for key in dict.fromkeys(f"HIVE-{n}" for n in _KEY.findall(link[2])) if key not in link[1]]
    return " ".join([link[1], *(f"({key})" for key in cited)])


def _summary(mention: _Mention) -> str:
    sentence = " ".join(mention.sentence.split()).strip(" ;,:")
    summary = f"{mention.heading}: {sentence}" if mention.heading and mention.heading.lower() not in sentence.lower() else sentence
    return summary if len(summary) <= 120 else summary[:117].rstrip() + "..."


def _steps(site: Site, pages: dict, roots: dict[str, str], epics: dict[str, str]) -> None:
    """A story per page that lists numbered steps (at least four), a sub-task per step."""
    number = FIRST_STEPS
    chosen = 0
    for page_id in sorted(pages, key=int):
        if chosen == MAX_STEP_PAGES or roots[page_id] not in epics or not _quotable(site, page_id, _level(roots[page_id])):
            continue
        steps = [_LINK.sub(r"\1", found[2]).strip() for found in map(_STEP.match, pages[page_id].markdown.splitlines()) if found]
        if len(steps) < 4:
            continue
        chosen += 1
        title = site.pages[page_id].title
        story = f"{PROJECT_KEY}-{number}"
        site.jira.create_issue(
            PROJECT_KEY, "Story", f"Steps of {title}", key=story, parent_key=epics[roots[page_id]], by=account_id("hive-admin"),
            at=_when(story, "created"), description=f"The steps [{title}|{page_url(page_id)}] lists.", security_level=_level(roots[page_id]),
        )
        number += 1
        for step in steps[:MAX_STEPS]:
            key = f"{PROJECT_KEY}-{number}"
            summary = step if len(step) <= 120 else step[:117].rstrip() + "..."
            site.jira.create_issue(PROJECT_KEY, "Sub-task", summary, key=key, parent_key=story, by=account_id("hive-admin"), at=_when(key, "created"), description=step)
            number += 1


def _links(site: Site, co_mentions: list[tuple[str, list[str]]]) -> None:
    made: set[tuple[str, str]] = set()
    for sentence, keys in co_mentions:
        first, *others = keys
        kind = "Blocks" if _BLOCKS.search(sentence) else "Duplicate" if _DUPLICATE.search(sentence) else "Relates"
        for other in others:
            pair = (other, first) if kind == "Blocks" else (first, other)
            if pair in made or pair[::-1] in made or (kind == "Relates" and len(made) >= MAX_RELATED_LINKS):
                continue
            made.add(pair)
            site.jira.link(kind, *pair)


def _root(site: Site, page_id: str) -> str:
    page = site.pages[page_id]
    ancestors = site.ancestors(page)
    return ancestors[0].id if ancestors else page.id


def _quotable(site: Site, page_id: str, level: str | None) -> bool:
    """May an issue on ``level`` repeat this page's text? Only when everyone who may read the issue
    may read the page: it is open, or closed to the committers alone and the issue is on Security."""
    page = site.pages[page_id]
    people = {p.id: p.read_users - {account_id(SYNC_LOGIN)} for p in (page, *site.ancestors(page))}  # the sync account reads for nobody
    closed = [p for p in (page, *site.ancestors(page)) if people[p.id] or p.read_groups]
    return all(level == SECURITY_LEVEL and not people[p.id] and p.read_groups == {"hive-committers"} for p in closed)


def _review(key: str, level: str | None) -> tuple[str, str] | None:
    """The restriction of a committers' review note on an open issue: to the role for one in ten,
    to the group for another one in ten, none elsewhere."""
    if level is not None:
        return None
    return {0: ("role", "Committers"), 1: ("group", REVIEWERS)}.get(stable_hash(key, "review") % 10)


def _level(root: str) -> str | None:
    return {DESIGN_DOCS_PAGE: SECURITY_LEVEL, MEETINGS_PAGE: INTERNAL_LEVEL}.get(root)


def _pick(key: str, purpose: str) -> str:
    return _PEOPLE[stable_hash(key, purpose) % len(_PEOPLE)]


def _when(key: str, purpose: str) -> datetime:
    return HISTORY_START + timedelta(minutes=stable_hash(key, purpose) % (HISTORY_DAYS * 24 * 60))


def _status(key: str) -> str:
    return ("Resolved", "Closed", "Open", "In Progress")[stable_hash(key, "status") % 4]

