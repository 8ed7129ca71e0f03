"""Confluence storage format (XHTML) → Markdown.

A macro pre-pass rewrites Confluence's own elements into plain HTML (or into placeholders that
must survive Markdown conversion untouched), then markdownify converts the rest on ``html.parser``
(lxml silently empties code blocks). What comes out:

* headings as ATX ``#`` headings (they are chunk boundaries downstream);
* the ``code`` macro → a fenced block with its language; ``noformat`` → a fenced block;
* ``info``/``note``/``tip``/``warning``/``panel`` → a blockquote that starts with the panel's title;
  ``expand`` → its title in bold and its body; ``toc`` and other macros without a body → nothing;
* ``jira`` → the issue key as text (an issue-key mention);
* ``ac:link`` to a page → a ``page:<id>`` link (the id looked up by space and title; those ids
  become ``LINKS_TO`` edges), to an anchor → ``#anchor``; a link to a page that cannot be
  resolved keeps only its text;
* ``ac:image`` of an attachment → ``<img id="image:<attachment id>" alt-text="…"/>`` in place,
  for the alt-text stage to fill; images from elsewhere keep their alt text or disappear.

Malformed XHTML raises :class:`~core.errors.TransformError` naming the line and column.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from html import escape
from html.entities import html5
from xml.etree import ElementTree

from bs4 import BeautifulSoup, NavigableString, Tag
from markdownify import MarkdownConverter

from core.errors import TransformError

# The generation of this conversion: raise it when its output changes, and every stored page is
# converted again from the bodies the raw store holds (no REST call; only changed text re-indexed).
CONVERTER = 3  # 3: page-link text left out of image contexts

NAMESPACES = 'xmlns:ac="http://atlassian.com/content" xmlns:ri="http://atlassian.com/resource/identifier"'
PANELS = {"info", "note", "tip", "warning", "panel"}
# Named entities: storage bodies use HTML's freely, XML knows five.
_ENTITIES = re.compile(r"&([A-Za-z][A-Za-z0-9]*);")
_XML_ENTITIES = {"amp", "lt", "gt", "quot", "apos"}
_PLACEHOLDER = "WAYFINDERIMAGE{}X"

PageResolver = Callable[[str, str], str | None]  # (space key, title) → page id


@dataclass(frozen=True)
class ImageRef:
    attachment_id: str
    filename: str
    alt: str  # the author's alt text or caption, if any
    heading_path: tuple[str, ...]  # the headings above the image, outermost first
    context: str  # the text around the image


@dataclass(frozen=True)
class Converted:
    markdown: str
    links: tuple[str, ...]  # page ids this page links to, in order of first mention
    images: tuple[ImageRef, ...]


def to_markdown(
    storage: str,
    *,
    space_key: str,
    resolve_page: PageResolver,
    attachments: Mapping[str, str],
    alt_texts: Mapping[str, str] | None = None,
) -> Converted:
    """Convert one page body. ``attachments`` maps the page's attachment file names to their ids;
    ``alt_texts`` maps attachment ids to alt text already written for them (else the author's)."""
    _check_well_formed(storage)
    soup = BeautifulSoup(storage, "html.parser")
    links: dict[str, None] = {}
    images: list[ImageRef] = []
    placeholders: dict[str, str] = {}

    for macro in reversed(soup.find_all("ac:structured-macro")):  # innermost first
        _macro(soup, macro)
    for link in soup.find_all("ac:link"):
        _link(soup, link, space_key, resolve_page, links)
    for image in soup.find_all("ac:image"):
        ref = _image(image, attachments)
        if ref is None:
            image.decompose()
            continue
        ref = ImageRef(ref.attachment_id, ref.filename, ref.alt, _heading_path(image), _context(image))
        images.append(ref)
        text = (alt_texts or {}).get(ref.attachment_id) or ref.alt
        key = _PLACEHOLDER.format(len(placeholders))
        placeholders[key] = f'<img id="image:{escape(ref.attachment_id)}" alt-text="{escape(text)}"/>'
        image.replace_with(soup.new_string(key))
    for leftover in soup.find_all(re.compile(r"^(ac|ri):")):
        leftover.unwrap()

    markdown = _Converter().convert_soup(soup)
    for key, tag in placeholders.items():
        markdown = markdown.replace(key, tag)
    markdown = re.sub(r"\n{3,}", "\n\n", markdown).strip() + "\n"
    return Converted(markdown, tuple(links), tuple(images))


def _check_well_formed(storage: str) -> None:
    try:
        ElementTree.fromstring(f"<root {NAMESPACES}>\n{_ENTITIES.sub(_entity, storage)}</root>")
    except ElementTree.ParseError as exc:
        line, column = exc.position
        raise TransformError(f"the storage XHTML is not well-formed at line {line - 1}, column {column + 1}") from exc


def _entity(match: re.Match[str]) -> str:
    """HTML's named entities stand for a character to the XML check; unknown names stay and fail it."""
    name = match[1]
    if name in _XML_ENTITIES or f"{name};" not in html5:
        return match[0]
    return " "


def _macro(soup: BeautifulSoup, macro: Tag) -> None:
    name = macro.get("ac:name", "")
    params = {p.get("ac:name", ""): p.get_text() for p in macro.find_all("ac:parameter", recursive=False)}
    body = macro.find("ac:rich-text-body", recursive=False)
    plain = macro.find("ac:plain-text-body", recursive=False)
    if name in ("code", "noformat"):
        pre = soup.new_tag("pre")
        code = soup.new_tag("code")
        if params.get("language"):
            code["class"] = [f"language-{params['language']}"]
        code.string = plain.get_text() if plain else ""
        pre.append(code)
        macro.replace_with(pre)
    elif name == "jira":
        macro.replace_with(soup.new_string(params.get("key", "")))
    elif name in PANELS or name == "expand":
        container = soup.new_tag("blockquote" if name in PANELS else "div")
        title = params.get("title", "")
        if title:
            heading = soup.new_tag("p")
            strong = soup.new_tag("strong")
            strong.string = title
            heading.append(strong)
            container.append(heading)
        if body is not None:
            for child in list(body.contents):
                container.append(child.extract())
        macro.replace_with(container)
    elif body is not None:
        body.unwrap()
        for param in macro.find_all("ac:parameter", recursive=False):
            param.decompose()
        macro.unwrap()
    else:
        macro.decompose()


def _link(soup: BeautifulSoup, link: Tag, space_key: str, resolve_page: PageResolver, links: dict[str, None]) -> None:
    page = link.find("ri:page")
    user = link.find("ri:user")
    anchor = link.get("ac:anchor", "")
    body = link.find(["ac:link-body", "ac:plain-text-link-body"])
    text = body.get_text() if body is not None else ""
    target: str | None = None
    if page is not None:
        title = page.get("ri:content-title", "")
        page_id = resolve_page(page.get("ri:space-key", space_key), title)
        if page_id is not None:
            target = f"page:{page_id}" + (f"#{anchor}" if anchor else "")
            links.setdefault(page_id, None)
        text = text or title
    elif user is not None:  # a mention: the text the author wrote, or the account it names
        name = user.get("ri:username") or user.get("ri:userkey") or user.get("ri:account-id") or "user"
        text = text or f"@{name}"
    elif anchor and link.find(re.compile(r"^ri:")) is None:
        target = f"#{anchor}"
        text = text or anchor
    if target is None:
        link.replace_with(soup.new_string(text))
        return
    anchor_tag = soup.new_tag("a", href=target)
    if body is not None and body.name == "ac:link-body":
        for child in list(body.contents):
            anchor_tag.append(child.extract())
    else:
        anchor_tag.string = text
    link.replace_with(anchor_tag)


def _image(image: Tag, attachments: Mapping[str, str]) -> ImageRef | None:
    attached = image.find("ri:attachment")
    if attached is None or attached.find("ri:page") is not None:
        return None
    filename = attached.get("ri:filename", "")
    attachment_id = attachments.get(filename)
    if attachment_id is None:
        return None
    caption = image.find("ac:caption")
    alt = image.get("ac:alt") or image.get("ac:title") or (caption.get_text(" ", strip=True) if caption else "")
    return ImageRef(attachment_id, filename, alt, (), "")


def _heading_path(node: Tag) -> tuple[str, ...]:
    path: dict[int, str] = {}
    for heading in node.find_all_previous(re.compile(r"^h[1-6]$")):
        level = int(heading.name[1])
        if level not in path and all(level < deeper for deeper in path):
            path[level] = heading.get_text(" ", strip=True)
    return tuple(path[level] for level in sorted(path))


def _context(node: Tag, chars: int = 400) -> str:
    """The text around an image, for its alt text. The text of links to other pages is left out:
    the alt text is shown to everyone who may read this page, and the linked page may be hidden
    from some of them (a reader sees such a link as "(unavailable link)", DESIGN.md A11)."""
    before = " ".join(s.strip() for s in reversed(list(_strings(node.find_all_previous(string=True), chars))))
    after = " ".join(s.strip() for s in _strings(node.find_all_next(string=True), chars))
    return f"{before} [image] {after}".strip()


def _in_page_link(text: NavigableString) -> bool:
    return any(parent.name == "a" and str(parent.get("href", "")).startswith("page:") for parent in text.parents)


def _strings(strings: list, chars: int):
    total = 0
    for text in strings:
        if total >= chars:
            return
        if text.strip() and not text.startswith(_PLACEHOLDER[:10]) and not _in_page_link(text):
            total += len(text)
            yield str(text)


class _Converter(MarkdownConverter):
    def __init__(self) -> None:
        super().__init__(heading_style="ATX", bullets="*", code_language_callback=_language, escape_misc=False, strip=["span"])


def _language(element: Tag) -> str:
    code = element.find("code") if element.name == "pre" else None
    classes = (code.get_attribute_list("class") if code is not None else None) or []
    return next((c.removeprefix("language-") for c in classes if c.startswith("language-")), "")
