"""The MuSiQue passages (``../shared/corpora/musique-100/corpus.json``, Wikipedia paragraphs) as
one flat Confluence space, ``MUSIQUE``: one page per passage, no hierarchy, readable by the Hive
space's groups. Seeded after :func:`devstack.atlassian.hive.seed_hive`, whose users it uses.

Used where a corpus of more than 2,000 pages is needed (``make bench-index-scale``). Titles repeat
in the corpus (several passages of one article); Confluence titles are unique per space, so a
repeat gets `` (2)``, `` (3)`` … in the order of the file.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from pathlib import Path

from devstack.atlassian.hive import SYNC_LOGIN, account_id
from devstack.atlassian.site import Site
from evals.datasets import MUSIQUE_FIRST_ID as FIRST_ID

SPACE_KEY = "MUSIQUE"


def seed_musique(site: Site, corpus_file: Path) -> int:
    """Add the space and its pages; returns how many pages."""
    passages = json.loads(corpus_file.read_text())
    site.add_space(SPACE_KEY, "MuSiQue passages", readers_users={account_id(SYNC_LOGIN)}, readers_groups={"hive-users", "hive-committers"})
    seen: dict[str, int] = {}
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for number, passage in enumerate(passages):
        title = passage["title"].strip() or "Untitled"
        seen[title] = seen.get(title, 0) + 1
        if seen[title] > 1:
            title = f"{title} ({seen[title]})"
        body = "".join(f"<p>{html.escape(line)}</p>" for line in passage["text"].splitlines() if line.strip())
        site.create_page(SPACE_KEY, title, body, page_id=str(FIRST_ID + number), by=account_id("hive-admin"), at=when)
    return len(passages)
