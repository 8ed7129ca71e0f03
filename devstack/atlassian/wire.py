"""JSON shapes of the Confluence REST API (v1), as Cloud and Data Center send them.

Pure functions from the site's state to dictionaries; :mod:`devstack.atlassian.server` does the
HTTP. ``Links`` carries what every ``_links`` block needs: the site's base URL (with its context
path, ``/wiki`` on Cloud) and the context path alone. Links inside a response are relative to the
base, so they do *not* start with the context path — the quirk a client that joins its own URL
and ``_links.next`` has to handle.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

from devstack.atlassian.site import Attachment, Page, Site, Space, User, Version


@dataclass(frozen=True)
class Links:
    base: str  # e.g. "http://127.0.0.1:8090/wiki"
    context: str  # e.g. "/wiki", or "" for a Data Center site at the root

    def block(self, links: dict[str, str]) -> dict[str, str]:
        return {**links, "base": self.base, "context": self.context}


def timestamp(when: datetime) -> str:
    """Atlassian's ISO form in UTC with milliseconds: ``2024-01-02T03:04:05.000Z``."""
    when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def user(site: Site, account_id: str) -> dict[str, object]:
    found = site.users.get(account_id)
    if found is None:
        return {"type": "known", "accountId": account_id, "displayName": "Unknown user"}
    return user_json(found)


def user_json(found: User) -> dict[str, object]:
    return {
        "type": "known",
        "username": found.username,
        "userKey": found.account_id,
        "accountId": found.account_id,
        "accountType": "atlassian",
        "email": found.email,
        "publicName": found.display_name,
        "displayName": found.display_name,
        "timeZone": found.time_zone,
        "profilePicture": {"path": "/images/icons/profilepics/default.svg", "width": 48, "height": 48, "isDefault": True},
        "_links": {"self": f"/rest/api/user?accountId={found.account_id}"},
    }


def version(site: Site, found: Version, content_id: str) -> dict[str, object]:
    return {
        "by": user(site, found.by),
        "when": timestamp(found.when),
        "friendlyWhen": found.when.strftime("%b %d, %Y"),
        "message": found.message,
        "number": found.number,
        "minorEdit": False,
        "_links": {"self": f"/rest/api/content/{content_id}/version/{found.number}"},
    }


def space_json(space: Space, links: Links) -> dict[str, object]:
    return {
        "id": space.id,
        "key": space.key,
        "name": space.name,
        "type": "global",
        "status": "current",
        # Neither release of Data Center lists permissions here (9.1 has its own endpoint, 8.x
        # JSON-RPC), and Cloud removed the v1 space reads (see :mod:`devstack.atlassian.cloud`).
        "_expandable": {"description": "", "homepage": ""},
        "_links": links.block({"webui": f"/spaces/{space.key}", "self": f"{links.base}/rest/api/space/{space.key}"}),
    }


def group_json(name: str) -> dict[str, object]:
    return {"type": "group", "name": name, "id": group_id(name), "_links": {"self": f"/rest/api/group/{urllib.parse.quote(name)}"}}


def group_id(name: str) -> str:
    """A group's id as Cloud spells them (a UUID), stable for its name."""
    digest = hashlib.sha256(name.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def page_json(site: Site, page: Page, links: Links, expand: set[str]) -> dict[str, object]:
    space = site.spaces[page.space_key]
    body: dict[str, object] = {
        "id": page.id,
        "type": page.kind,
        "status": "current",
        "title": page.title,
        "extensions": {"position": page.position},
        "_expandable": {},
        "_links": links.block({
            "webui": f"/spaces/{page.space_key}/pages/{page.id}/{urllib.parse.quote_plus(page.title)}",
            "edit": f"/pages/resumedraft.action?draftId={page.id}",
            "tinyui": f"/x/{page.id}",
            "self": f"{links.base}/rest/api/content/{page.id}",
        }),
    }
    expandable: dict[str, str] = body["_expandable"]  # type: ignore[assignment]
    wants = _expand_tree(expand)
    if "space" in wants:
        body["space"] = space_json(space, links)
    else:
        expandable["space"] = f"/rest/api/space/{page.space_key}"
    if "version" in wants:
        body["version"] = version(site, page.version, page.id)
    else:
        expandable["version"] = ""
    if "history" in wants:
        history: dict[str, object] = {
            "latest": True,
            "createdBy": user(site, page.created.by),
            "createdDate": timestamp(page.created.when),
        }
        if "lastUpdated" in wants["history"]:
            history["lastUpdated"] = version(site, page.version, page.id)
        body["history"] = history
    else:
        expandable["history"] = f"/rest/api/content/{page.id}/history"
    if "ancestors" in wants:
        body["ancestors"] = [page_json(site, a, links, set()) for a in site.ancestors(page)]
    else:
        expandable["ancestors"] = ""
    if "body" in wants:
        representations = wants["body"] or {"storage"}
        rendered: dict[str, object] = {}
        for name in representations:
            value = page.body if name == "storage" else view_html(page.body) if name in ("view", "export_view", "styled_view") else None
            if value is not None:
                rendered[name] = {"value": value, "representation": name, "_expandable": {"content": f"/rest/api/content/{page.id}"}}
        body["body"] = rendered
    else:
        expandable["body"] = ""
    if "metadata" in wants:
        metadata: dict[str, object] = {}
        if "labels" in wants["metadata"]:
            metadata["labels"] = paged([label_json(name) for name in page.labels], 0, 200, None)
        body["metadata"] = metadata
    if "restrictions" in wants:
        body["restrictions"] = {"read": restriction_json(site, page, "read", links)}
    else:
        expandable["restrictions"] = f"/rest/api/content/{page.id}/restriction/byOperation"
    if "children" in wants:
        children: dict[str, object] = {}
        if "page" in wants["children"]:
            kids = site.children(page.id)
            children["page"] = paged([page_json(site, kid, links, set()) for kid in kids], 0, 25, None)
        if "attachment" in wants["children"]:
            attached = site.attachments_of(page.id)
            children["attachment"] = paged([attachment_json(site, a, links) for a in attached], 0, 25, None)
        body["children"] = children
    else:
        expandable["children"] = f"/rest/api/content/{page.id}/child"
    return body


def restriction_json(site: Site, page: Page, operation: str, links: Links) -> dict[str, object]:
    users = [user(site, account_id) for account_id in sorted(page.read_users)] if operation == "read" else []
    groups = [group_json(name) for name in sorted(page.read_groups)] if operation == "read" else []
    return {
        "operation": operation,
        "restrictions": {
            "user": {**paged(users, 0, 200, None), "_links": {}},
            "group": {**paged(groups, 0, 200, None), "_links": {}},
        },
        "_expandable": {"content": f"/rest/api/content/{page.id}"},
        "_links": links.block({"self": f"{links.base}/rest/api/content/{page.id}/restriction/byOperation/{operation}"}),
    }


def attachment_json(site: Site, attachment: Attachment, links: Links) -> dict[str, object]:
    download = (
        f"/download/attachments/{attachment.page_id}/{urllib.parse.quote(attachment.filename)}"
        f"?version=1&modificationDate={int(attachment.created.timestamp() * 1000)}&api=v2"
    )
    return {
        "id": attachment.id,
        "type": "attachment",
        "status": "current",
        "title": attachment.filename,
        "metadata": {"mediaType": attachment.media_type, "comment": attachment.comment, "labels": paged([], 0, 200, None)},
        "extensions": {"mediaType": attachment.media_type, "fileSize": len(attachment.data), "comment": attachment.comment},
        "version": version(site, Version(1, attachment.created, attachment.by, ""), attachment.id),
        "container": {"id": attachment.page_id, "type": "page", "title": site.pages[attachment.page_id].title},
        "_links": links.block({
            "webui": f"/pages/viewpageattachments.action?pageId={attachment.page_id}&preview={urllib.parse.quote(attachment.filename)}",
            "download": download,
            "self": f"{links.base}/rest/api/content/{attachment.id}",
        }),
    }


def label_json(name: str) -> dict[str, object]:
    return {"prefix": "global", "name": name, "id": str(int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)), "label": name}


def paged(results: list[object], start: int, limit: int, next_link: str | None, **extra: object) -> dict[str, object]:
    body: dict[str, object] = {"results": results, "start": start, "limit": limit, "size": len(results), **extra}
    if next_link is not None:
        body["_links"] = {"next": next_link}
    return body


def error(status: int, message: str) -> dict[str, object]:
    """The error body Confluence sends with 4xx/5xx answers."""
    return {
        "statusCode": status,
        "data": {"authorized": status not in (401, 403), "valid": True, "errors": [], "successful": False},
        "message": message,
        "reason": _REASONS.get(status, "Error"),
    }


_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


def view_html(storage: str) -> str:
    """A plain rendering of storage format: code macros become ``pre``, links their text, other
    macros their body; enough for clients that ask for ``body.view``."""
    html = re.sub(
        r'<ac:structured-macro ac:name="code"[^>]*>.*?<ac:plain-text-body><!\[CDATA\[(.*?)\]\]></ac:plain-text-body></ac:structured-macro>',
        lambda m: f"<pre>{escape(m[1])}</pre>",
        storage,
        flags=re.S,
    )
    html = re.sub(r'<ac:structured-macro ac:name="jira"[^>]*>.*?<ac:parameter ac:name="key">([^<]*)</ac:parameter></ac:structured-macro>', r"<span>\1</span>", html, flags=re.S)
    html = re.sub(r"<ac:parameter[^>]*>.*?</ac:parameter>", "", html, flags=re.S)
    return re.sub(r"</?(?:ac|ri):[^>]*>", "", html)


def _expand_tree(expand: set[str]) -> dict[str, set[str]]:
    """``{"body.storage", "version"}`` → ``{"body": {"storage"}, "version": set()}``; deeper paths
    keep their remainder (``history.lastUpdated`` → ``{"history": {"lastUpdated"}}``)."""
    tree: dict[str, set[str]] = {}
    for path in expand:
        head, _, rest = path.partition(".")
        tree.setdefault(head, set())
        if rest:
            tree[head].add(rest.split(".")[0] if head not in ("restrictions",) else rest)
    return tree
