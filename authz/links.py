"""Links inside returned text (DESIGN.md A11): a link to something the caller cannot see keeps its
text and loses its target, exactly as a link to a page that does not exist.

Wiki text is the visible page's own content, but the targets of its links are other objects: a
link to a restricted page or issue would hand out its id. Every reference in every text a
response carries (:func:`core.references.references`: pages by typed id, ``pageId=``, Cloud and
Data Center paths, attachment downloads, the REST API and tiny links; issues by typed id,
``/browse/`` and the REST API; in any case and with ``&amp;`` or percent encoding) is authorized
through the request's gate in one batch, and a reference the caller may not see is rewritten:

* ``[text](target)`` becomes ``text`` and ``![alt](target)`` becomes ``alt``;
* any other whitespace-delimited word holding such a reference (a bare URL, ``page:123``, an
  autolink, an HTML attribute) becomes ``(unavailable link)`` as a whole.

A reference to a page or issue Wayfinder does not know is not visible, so it is rewritten the same
way: unknown and forbidden look alike. Links by title (``/display/SPACE/Title``) carry no id, and
a title is no proof of which page is meant (titles change and repeat across spaces); they are
:data:`core.references.UNRESOLVED`, which no gate finds visible, so they always lose their target.
The sources already turn links to their own pages into ``page:<id>`` when they build the Markdown;
a link by title left in the text is one they could not resolve either.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence

from authz.gate import Gate
from core.references import references
from core.text import MARKDOWN_LINK

UNAVAILABLE = "(unavailable link)"
_WORD = re.compile(r"\S+")


def references_in(texts: Iterable[str]) -> set[str]:
    """Typed ids of every page and issue ``texts`` link to or name (and
    :data:`~core.references.UNRESOLVED` for a link that names none)."""
    return set().union(*(references(text) for text in texts))


def render(text: str, visible: Collection[str]) -> str:
    """``text`` with every reference outside ``visible`` stripped of its target."""

    def hides(fragment: str) -> bool:
        return any(ref not in visible for ref in references(fragment))

    text = MARKDOWN_LINK.sub(lambda m: m["text"] if hides(m["target"]) else m[0], text)
    return _WORD.sub(lambda m: UNAVAILABLE if hides(m[0]) else m[0], text)


async def redact(gate: Gate, texts: Sequence[str]) -> list[str]:
    """Each of ``texts`` with the targets the caller may not see removed, decided in one batch
    (none, when the gate already knows every target)."""
    wanted = references_in(texts)
    visible = await gate.visible(sorted(wanted)) if wanted else set()
    return [render(text, visible) for text in texts]
