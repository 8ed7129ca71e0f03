"""Issues as the sinks take them: the source's records placed in their tree (parents first,
siblings numbered by key), with their Markdown.

A sub-task whose parent is not held is left out: its visibility is its parent's, which is unknown.
A standard issue whose epic is not held sits at the project's top: an epic passes nothing to its
issues, so nothing about who may see it is lost.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence

from core.models import Comment, Issue
from pipeline.sources.jira_rest import RemoteIssue

log = logging.getLogger("wayfinder.sync")


def placed_issues(
    remote: Sequence[RemoteIssue],
    markdown: Mapping[str, str],
    links: Mapping[str, Sequence[str]] = {},
    comments: Mapping[str, Sequence[Comment]] = {},
) -> list[Issue]:
    """``remote`` (one project's listing) as Issue records, parents before children; ``markdown``
    gives each issue's text by key (an issue without any gets its summary alone), ``links`` the
    keys it links to, ``comments`` its restricted comments."""
    by_key = {issue.key: issue for issue in remote}
    children: dict[str | None, list[RemoteIssue]] = defaultdict(list)
    for issue in remote:
        parent = issue.parent_key if issue.parent_key in by_key else None
        if issue.hierarchy_level < 0 and parent is None:
            log.warning("sub-task %s is left out: its parent %s is not held", issue.key, issue.parent_key)
            continue
        children[parent].append(issue)
    placed: list[Issue] = []

    def walk(parent: str | None) -> None:
        for position, issue in enumerate(sorted(children.get(parent, []), key=_number)):
            placed.append(
                Issue(
                    key=issue.key,
                    project_key=issue.project_key,
                    issue_type=issue.issue_type,
                    hierarchy_level=issue.hierarchy_level,
                    summary=issue.summary,
                    parent_key=parent,
                    position=position,
                    url=issue.url,
                    markdown=markdown.get(issue.key) or f"# {issue.key}: {issue.summary}\n",
                    security_level=issue.security_level,
                    reporter=issue.reporter,
                    assignee=issue.assignee,
                    labels=issue.labels,
                    updated_at=issue.updated,
                    links=tuple(links.get(issue.key, ())),
                    comments=tuple(comments.get(issue.key, ())),
                )
            )
            walk(issue.key)

    walk(None)
    return placed


def _number(issue: RemoteIssue) -> tuple[int, str]:
    number = issue.key.rpartition("-")[2]
    return (int(number), issue.key) if number.isdigit() else (0, issue.key)
