"""The authorization gate: the only place where visibility is decided.

One Gate lives for one request and one principal. It asks the Authorizer in batches, remembers
answers for the rest of that request only (no cross-request cache, so revocation takes effect on
the next request), fails closed on any error, and records every check so tests and the audit
receipt can see them. Nothing can be handed to it in advance: records and answers start empty.

* **Delegation (A2).** For an agent acting for a user, every batch also asks whether the agent
  still holds a live grant from that user for the task, in the same BatchCheck. Without one the
  request is refused as a whole.
* **One deadline (A5).** All the authorization of a request — every round trip, and a reconnect
  to OpenFGA if one is needed — shares one time budget. Past it the request fails closed.
* **Ids the engine could choke on are never sent.** An object that is not a well-formed id is
  simply not visible; a caller cannot turn bad input into ``authorization_unavailable``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from authz.base import Authorizer, Check
from authz.tuples import can_view, holds_live_grant
from core import ids
from core.errors import AuthorizationUnavailable, InvalidArgument, NotFound, Unauthenticated
from core.models import Principal
from core.telemetry import span

DEFAULT_DEADLINE_S = 3.0


@dataclass(frozen=True)
class CheckRecord:
    subject: str
    relation: str
    object: str
    allowed: bool


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Gate:
    authorizer: Authorizer
    principal: Principal
    deadline_s: float = DEFAULT_DEADLINE_S
    clock: Callable[[], datetime] = _utc_now  # grant expiry is judged against this clock
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    records: list[CheckRecord] = field(default_factory=list, init=False)
    _answers: dict[str, bool] = field(default_factory=dict, init=False, repr=False)
    _spent_s: float = field(default=0.0, init=False, repr=False)

    async def visible(self, objects: Iterable[str]) -> set[str]:
        """The subset of ``objects`` (typed ids) the principal may view."""
        wanted = list(dict.fromkeys(objects))
        missing = [obj for obj in wanted if obj not in self._answers]
        askable = []
        for obj in missing:
            if _well_formed(obj):
                askable.append(obj)
            else:
                self._answers[obj] = False
        if askable:
            checks = [can_view(self.principal.subject, obj) for obj in askable]
            if self.principal.delegated:
                checks.append(holds_live_grant(self.principal, self.clock()))
            answers = await self._ask(checks)
            for check, allowed in zip(checks, answers, strict=True):
                self.records.append(CheckRecord(check.user, check.relation, check.object, allowed))
            if self.principal.delegated:
                answers.pop()
                if not self.records[-1].allowed:
                    raise Unauthenticated("the agent holds no live grant from this user for this task")
            self._answers.update(zip(askable, answers, strict=True))
        return {obj for obj in wanted if self._answers[obj]}

    async def require(self, obj: str) -> None:
        """Raise NotFound unless ``obj`` is visible; the message never says which of the two it was."""
        if obj not in await self.visible([obj]):
            raise NotFound(obj)

    async def _ask(self, checks: list[Check]) -> list[bool]:
        remaining = self.deadline_s - self._spent_s
        if remaining <= 0:
            raise AuthorizationUnavailable(f"authorization took longer than {self.deadline_s}s for this request")
        started = time.monotonic()
        try:
            with span("authz.batch_check", checks=len(checks)):
                async with asyncio.timeout(remaining):
                    answers = await self.authorizer.batch_check(checks)
        except AuthorizationUnavailable:
            raise
        except TimeoutError as exc:
            raise AuthorizationUnavailable(f"authorization took longer than {self.deadline_s}s for this request") from exc
        except Exception as exc:  # any failure of the engine means "cannot decide": fail closed
            raise AuthorizationUnavailable(f"authorization failed: {type(exc).__name__}") from exc
        finally:
            self._spent_s += time.monotonic() - started
        if len(answers) != len(checks):
            raise AuthorizationUnavailable("authorizer returned the wrong number of answers")
        return list(answers)

    def receipt(self, key: bytes) -> dict[str, object]:
        """The audit record of this request (A9). Never returned to the caller.

        Who asked and what was denied appear only as HMACs under ``key``: linkable within one
        deployment's logs, not reversible by enumerating ids without the key.
        """
        denied = sorted({r.object for r in self.records if not r.allowed})
        allowed = sum(r.allowed for r in self.records)
        return {
            "request_id": self.request_id,
            "principal": _digest(key, self.principal.subject),
            "agent": _digest(key, f"agent:{self.principal.agent}") if self.principal.agent else None,
            "task": _digest(key, f"task:{self.principal.task}") if self.principal.task else None,
            "model_id": self.authorizer.model_id,
            "checks": len(self.records),
            "allowed": allowed,
            "denied": len(self.records) - allowed,
            "denied_ids": [_digest(key, obj) for obj in denied],
        }


def _well_formed(obj: str) -> bool:
    """Only spaces, pages, projects, issues, restricted comments and (asked by the search pre-filter) security levels
    are OpenFGA objects; anything else (an image is authorized through its page) is not visible by
    itself."""
    if obj.startswith("security_level:"):
        return ids.is_name(obj.removeprefix("security_level:"))
    try:
        kind, _ = ids.parse(obj)
    except InvalidArgument:
        return False
    return kind in ("space", "page", "project", "issue", "comment")


def _digest(key: bytes, value: str) -> str:
    return hmac.new(key, value.encode(), hashlib.sha256).hexdigest()[:32]
