"""Pre-filtering search candidates (DESIGN.md A7): the documents a principal may see, as far as the
last sync knew, so the index ranks those and not the whole corpus.

When a user may see a small share of a large site, ranking everything and authorizing the best
few leaves almost nothing: the hits are other people's pages. So each sync writes, beside the
index, every page's *anchor* (:func:`authz.tuples.anchors`: the object whose view check answers
the page's own) grouped by space; a search asks the gate about the spaces, then about the
restricted anchors inside the visible ones, and lets the index search only the documents behind
the visible anchors.

This narrows candidates and decides nothing: every document the index then returns is checked
live, page and space, exactly as without it. Keys older than OpenFGA's tuples (a restriction
changed since the last sync) may drop a document the user may now see (recall) or admit one they
may not, which the live check then denies; they never show one. The answers are the gate's,
asked in the request's own batches and recorded with its other checks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from authz.gate import Gate
from core.files import write_atomically

ACL_FILE = "acl.json"
# Restricted anchors checked per search at most (ten OpenFGA batches): a site with more restricted
# subtrees in the spaces a user may read gets those spaces' pages as candidates, all checked live.
MAX_ANCHOR_CHECKS = 500


@dataclass(frozen=True)
class AclKeys:
    """Space id → anchor → the documents (page ids) behind it."""

    by_space: Mapping[str, Mapping[str, tuple[str, ...]]]

    @classmethod
    def of(cls, spaces: Mapping[str, Mapping[str, str]]) -> AclKeys:
        """From space id → (page id → anchor)."""
        grouped: dict[str, dict[str, list[str]]] = {}
        for space, anchor_of in spaces.items():
            by_anchor = grouped.setdefault(space, {})
            for doc, anchor in sorted(anchor_of.items()):
                by_anchor.setdefault(anchor, []).append(doc)
        return cls({space: {a: tuple(docs) for a, docs in anchors.items()} for space, anchors in grouped.items()})

    def save(self, path: Path) -> None:
        write_atomically(path, json.dumps({"spaces": {s: {a: list(d) for a, d in anchors.items()} for s, anchors in self.by_space.items()}}))

    @classmethod
    def load(cls, path: Path) -> AclKeys:
        raw = json.loads(path.read_text())
        return cls({s: {a: tuple(d) for a, d in anchors.items()} for s, anchors in raw["spaces"].items()})


class AclFile:
    """The keys the last sync wrote beside the index, read again whenever the file changes. No
    file (an index no sync of this version wrote) means no pre-filter: search then ranks
    everything and post-filters, as it always may."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._stamp: tuple[int, int] | None = None
        self._keys: AclKeys | None = None

    def current(self) -> AclKeys | None:
        try:
            stat = os.stat(self._path)
        except FileNotFoundError:
            self._stamp, self._keys = None, None
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._keys, self._stamp = AclKeys.load(self._path), stamp
        return self._keys


async def admissible(gate: Gate, keys: AclKeys, spaces: Iterable[str]) -> frozenset[str]:
    """The documents of ``spaces`` behind anchors the principal may view: the spaces in one batch,
    then the restricted anchors of the visible spaces in another (none when there are none). Past
    MAX_ANCHOR_CHECKS restricted anchors, all of the visible spaces' documents are admitted
    unchecked: more candidates, never more results, and a request that stays within its deadline."""
    known = [space for space in dict.fromkeys(spaces) if space in keys.by_space]
    visible_spaces = await gate.visible(known)
    restricted = sorted({a for s in visible_spaces for a in keys.by_space[s] if a != s})
    if len(restricted) > MAX_ANCHOR_CHECKS:
        visible = visible_spaces | set(restricted)
    else:
        visible = visible_spaces | (await gate.visible(restricted) if restricted else set())
    return frozenset(doc for s in visible_spaces for anchor, docs in keys.by_space[s].items() if anchor in visible for doc in docs)
