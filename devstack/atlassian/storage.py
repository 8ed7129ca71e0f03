"""Markdown of the Hive export → Confluence storage format (XHTML), for seeding the emulator.

The export lost the storage format the pages were written in; this puts back what real pages
have, deterministically, so the pipeline's XHTML → Markdown transform meets the real constructs:

* fenced code → the ``code`` macro with its ``language`` parameter and a CDATA body (the export
  lost the languages: SQL, shell, XML and Java are recognised by how the code starts); code blocks
  longer than :data:`EXPAND_LINES` lines sit inside an ``expand`` macro, as long listings often do;
* a paragraph that is only "Version", "Version information", "Note", "Info", "Tip" or "Warning"
  (the export's remains of a titled panel) and the block after it → an ``info``/``note``/``tip``/
  ``warning`` macro with that title;
* links to pages of the space (``page:<id>``) → ``ac:link`` with ``ri:page`` (by title, as Confluence
  stores them) and ``ac:anchor``; same-page anchors → ``ac:link`` with only ``ac:anchor``;
* ``HIVE-nnnn`` keys, bare or as a link whose text is the key → the ``jira`` issue macro;
* images attached to the page → ``ac:image`` with ``ri:attachment``; other images → ``ri:url``;
* the export's rendering of the ``toc`` macro (a list of nothing but same-page anchor links before
  the first section) → the ``toc`` macro again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape
from xml.etree import ElementTree

from markdown_it import MarkdownIt
from markdown_it.token import Token

EXPAND_LINES = 40
JIRA_SERVER = "ASF JIRA"
PANEL_TITLES = {
    "version": "info",
    "version information": "info",
    "info": "info",
    "note": "note",
    "tip": "tip",
    "warning": "warning",
}
NAMESPACES = 'xmlns:ac="http://atlassian.com/content" xmlns:ri="http://atlassian.com/resource/identifier"'

_JIRA_KEY = re.compile(r"\b(HIVE-\d+)\b")
_JIRA_URL = re.compile(r"^https?://issues\.apache\.org/jira/browse/(HIVE-\d+)/?$")
_PAGE_LINK = re.compile(r"^page:(\d+)(?:#(.*))?$")
_ATTACHMENT = re.compile(r"^/?attachments/(\d+)/([^/?#]+)")
_PANEL = re.compile(r"<p>([^<]{2,20})</p>\n(<(p|ul|ol|pre)>.*?</\3>|<ac:structured-macro ac:name=\"code\">.*?</ac:structured-macro>)\n", re.S)


def jira_macro(key: str) -> str:
    return (
        '<ac:structured-macro ac:name="jira" ac:schema-version="1">'
        f'<ac:parameter ac:name="server">{JIRA_SERVER}</ac:parameter>'
        f'<ac:parameter ac:name="key">{key}</ac:parameter></ac:structured-macro>'
    )


_SQL_START = re.compile(
    r"^\s*(?:hive>\s*|0: jdbc:[^>]*>\s*)?(?:select|create|insert|alter|drop|show|describe|desc|set|from|with|load|use|grant|revoke|explain|analyze|msck|truncate|update|delete|merge)\b",
    re.I,
)
_SHELL_START = re.compile(r"^\s*(?:\$ |# |\./|bin/|hive |hadoop |mvn |export |cd |sudo |git |beeline|hdfs |yarn |java -)")


def guess_language(code: str) -> str:
    if _SQL_START.match(code):
        return "sql"
    if _SHELL_START.match(code):
        return "bash"
    if code.lstrip().startswith("<"):
        return "xml"
    if re.search(r"\b(?:public class|import java\.|package [a-z]+\.)", code):
        return "java"
    return ""


def code_macro(code: str, language: str) -> str:
    body = code.replace("]]>", "]]]]><![CDATA[>")  # a CDATA section cannot hold its own end
    language_parameter = f'<ac:parameter ac:name="language">{escape(language)}</ac:parameter>' if language else ""
    macro = (
        f'<ac:structured-macro ac:name="code">{language_parameter}'
        f"<ac:plain-text-body><![CDATA[{body}]]></ac:plain-text-body></ac:structured-macro>"
    )
    if code.count("\n") > EXPAND_LINES:
        return (
            '<ac:structured-macro ac:name="expand"><ac:parameter ac:name="title">Expand source</ac:parameter>'
            f"<ac:rich-text-body>{macro}</ac:rich-text-body></ac:structured-macro>"
        )
    return macro


def to_storage(markdown: str, *, page_id: str, titles: Mapping[str, str], space_key: str) -> str:
    """Storage-format XHTML of one page. ``titles`` maps page ids of the space to their titles;
    links to ids it does not hold stay ordinary links."""
    renderer = _renderer(page_id, titles, space_key)
    tokens = renderer.parse(markdown)
    tokens = _toc(tokens)
    _rewrite_inline(tokens)
    html = renderer.renderer.render(tokens, renderer.options, {})
    return _PANEL.sub(_panel, html)


def check_well_formed(storage: str) -> None:
    """Raise ``xml.etree.ElementTree.ParseError`` unless ``storage`` is well-formed XHTML."""
    ElementTree.fromstring(f"<root {NAMESPACES}>{storage}</root>")


def _renderer(page_id: str, titles: Mapping[str, str], space_key: str) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    md.validateLink = lambda url: not url.lower().startswith(("javascript:", "vbscript:", "data:text"))
    md.normalizeLink = lambda url: url
    rules = md.renderer.rules
    open_links: list[str] = []  # the closing tag each open link needs

    def fence(tokens: list[Token], idx: int, options, env) -> str:
        token = tokens[idx]
        language = token.info.strip().split(" ")[0] if token.info.strip() else guess_language(token.content)
        return code_macro(token.content, language) + "\n"

    def link_open(tokens: list[Token], idx: int, options, env) -> str:
        href = str(tokens[idx].attrs.get("href", ""))
        page = _PAGE_LINK.match(href)
        if page and page[1] in titles:
            anchor = f' ac:anchor="{escape(page[2])}"' if page[2] else ""
            target = "" if page[1] == page_id else f'<ri:page ri:content-title="{escape(titles[page[1]])}" ri:space-key="{space_key}" />'
            open_links.append("</ac:link-body></ac:link>")
            return f"<ac:link{anchor}>{target}<ac:link-body>"
        if href.startswith("#") and len(href) > 1:
            open_links.append("</ac:link-body></ac:link>")
            return f'<ac:link ac:anchor="{escape(href[1:])}"><ac:link-body>'
        open_links.append("</a>")
        return f'<a href="{escape(href)}">'

    def link_close(tokens: list[Token], idx: int, options, env) -> str:
        return open_links.pop()

    def image(tokens: list[Token], idx: int, options, env) -> str:
        token = tokens[idx]
        src = str(token.attrs.get("src", ""))
        alt = token.content
        alt_attribute = f' ac:alt="{escape(alt)}"' if alt else ""
        attached = _ATTACHMENT.match(src)
        if attached and attached[1] == page_id:
            return f'<ac:image{alt_attribute}><ri:attachment ri:filename="{escape(attached[2])}" /></ac:image>'
        return f'<ac:image{alt_attribute}><ri:url ri:value="{escape(src)}" /></ac:image>'

    # Confluence keeps every row of a table in one tbody, header cells as th.
    rules["table_open"] = lambda tokens, idx, options, env: '<table class="wrapped"><tbody>\n'
    rules["table_close"] = lambda tokens, idx, options, env: "</tbody></table>\n"
    for part in ("thead_open", "thead_close", "tbody_open", "tbody_close"):
        rules[part] = lambda tokens, idx, options, env: ""
    rules["fence"] = fence
    rules["code_block"] = fence
    rules["link_open"] = link_open
    rules["link_close"] = link_close
    rules["image"] = image
    return md


def _rewrite_inline(tokens: list[Token]) -> None:
    """Jira keys become the jira macro: a link whose text is just the key, and bare keys in text."""
    for block in tokens:
        if block.type != "inline" or not block.children:
            continue
        children = block.children
        out: list[Token] = []
        i = 0
        while i < len(children):
            token = children[i]
            if token.type == "link_open" and i + 2 < len(children) and children[i + 2].type == "link_close":
                url = _JIRA_URL.match(str(token.attrs.get("href", "")))
                if url and children[i + 1].type == "text" and children[i + 1].content.strip() == url[1]:
                    out.append(_html(jira_macro(url[1])))
                    i += 3
                    continue
            if token.type == "link_open":  # text inside other links stays as it is
                depth_end = next(j for j in range(i, len(children)) if children[j].type == "link_close")
                out.extend(children[i : depth_end + 1])
                i = depth_end + 1
                continue
            if token.type == "text" and _JIRA_KEY.search(token.content):
                for n, part in enumerate(_JIRA_KEY.split(token.content)):
                    out.append(_html(jira_macro(part)) if n % 2 else _text(part))
                i += 1
                continue
            out.append(token)
            i += 1
        block.children = out


def _toc(tokens: list[Token]) -> list[Token]:
    """The first list before any section heading that holds only same-page anchor links was a
    ``toc`` macro before the export rendered it."""
    for start, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag != "h1":
            return tokens
        if token.type == "bullet_list_open" and token.level == 0:
            end = next(i for i in range(start, len(tokens)) if tokens[i].type == "bullet_list_close" and tokens[i].level == 0)
            inlines = [t for t in tokens[start:end] if t.type == "inline"]
            only_list = all(t.type in _LIST_TOKENS for t in tokens[start:end])
            if inlines and only_list and all(_only_anchor_links(t) for t in inlines):
                toc = Token("html_block", "", 0, content='<ac:structured-macro ac:name="toc" ac:schema-version="1" />\n')
                return [*tokens[:start], toc, *tokens[end + 1 :]]
            return tokens
    return tokens


_LIST_TOKENS = {"bullet_list_open", "bullet_list_close", "list_item_open", "list_item_close", "paragraph_open", "paragraph_close", "inline"}


def _only_anchor_links(inline: Token) -> bool:
    children = inline.children or []
    links = [c for c in children if c.type == "link_open"]
    return bool(links) and all(str(c.attrs.get("href", "")).startswith("#") for c in links) and all(
        c.type in ("link_open", "link_close", "softbreak") or (c.type == "text" and (not c.content.strip() or in_link))
        for c, in_link in _with_link_state(children)
    )


def _with_link_state(children: list[Token]):
    inside = False
    for child in children:
        if child.type == "link_open":
            inside = True
        yield child, inside
        if child.type == "link_close":
            inside = False


def _html(content: str) -> Token:
    return Token("html_inline", "", 0, content=content)


def _text(content: str) -> Token:
    return Token("text", "", 0, content=content)


def _panel(match: re.Match[str]) -> str:
    title = match[1].strip()
    kind = PANEL_TITLES.get(title.lower())
    if kind is None:
        return match[0]
    return (
        f'<ac:structured-macro ac:name="{kind}"><ac:parameter ac:name="title">{escape(title)}</ac:parameter>'
        f"<ac:rich-text-body>{match[2]}</ac:rich-text-body></ac:structured-macro>\n"
    )

