"""The visibility rules that combine several checks. The retrievers and the navigator ask these;
they never decide visibility themselves (DESIGN.md A3, A4).

* A page is shown only when the page **and its space** pass the gate in this request: a page whose
  stored space disagrees with OpenFGA's (a move not yet synchronised everywhere) stays hidden.
* A breadcrumb is a path: it is shown from the page's parent up to, not past, the first ancestor
  the caller cannot see, so every node of the returned path is visible.
* A derived item (an entity or relation merged from several documents) is shown only when every
  document supporting it is visible; one hidden or unknown document hides it whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from authz.gate import Gate


class Node(Protocol):
    @property
    def id(self) -> str: ...


class PlacedPage(Protocol):
    """A page with its space and its ancestors (root first, parent last); a dataclass."""

    @property
    def id(self) -> str: ...

    @property
    def space_id(self) -> str: ...

    @property
    def ancestors(self) -> Sequence[Node]: ...


P = TypeVar("P", bound=PlacedPage)
N = TypeVar("N", bound=Node)


def visible_path_to(ancestors: Sequence[N], visible: Collection[str]) -> tuple[N, ...]:
    """The tail of ``ancestors`` (root first) that ends at the parent and holds only visible nodes."""
    kept: list[N] = []
    for node in reversed(ancestors):  # walk up from the parent
        if node.id not in visible:
            break
        kept.append(node)
    return tuple(reversed(kept))


def derived_visible(evidence: Collection[str], visible_documents: Collection[str]) -> bool:
    """A merged entity or relation may be shown only if every supporting document is visible."""
    return bool(evidence) and all(doc in visible_documents for doc in evidence)


async def pages_in_visible_spaces(gate: Gate, pages: Mapping[str, P], *, also: Iterable[str] = ()) -> dict[str, P]:
    """The ``pages`` that are visible with their spaces, breadcrumbs not yet authorized: for
    candidates that may never be shown (search). Pass the survivors to :func:`visible_pages`
    before showing them. ``also`` joins the same batch."""
    visible = await gate.visible([obj for page in pages.values() for obj in (page.id, page.space_id)] + list(also))
    return {key: page for key, page in pages.items() if page.id in visible and page.space_id in visible}


async def visible_pages(gate: Gate, pages: Mapping[str, P], *, also: Iterable[str] = ()) -> dict[str, P]:
    """The visible ``pages``, each with its breadcrumb cut by :func:`visible_path_to`.

    The pages, their spaces, every ancestor, and the ids in ``also`` (which the caller will ask
    the gate about next, e.g. link targets) are authorized in one batch.
    """
    visible = await gate.visible(
        [obj for page in pages.values() for obj in (page.id, page.space_id, *(a.id for a in page.ancestors))]
        + list(also)
    )
    return {
        key: dataclasses.replace(page, ancestors=visible_path_to(page.ancestors, visible))  # type: ignore[type-var]
        for key, page in pages.items()
        if page.id in visible and page.space_id in visible
    }
