"""The authorization gate: the only place where visibility is decided.

One Gate lives for one request and one principal. It asks the Authorizer in batches, remembers
answers for the rest of that request only (no cross-request cache, so revocation is immediate),
fails closed on any error, and records every check so tests and the audit receipt can see them.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from authz.base import Authorizer
from authz.tuples import can_view
from core.errors import AuthorizationUnavailable, NotFound
from core.models import Principal


@dataclass(frozen=True)
class CheckRecord:
    subject: str
    relation: str
    object: str
    allowed: bool


@dataclass
class Gate:
    authorizer: Authorizer
    principal: Principal
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    records: list[CheckRecord] = field(default_factory=list)
    _answers: dict[str, bool] = field(default_factory=dict)

    async def visible(self, objects: Iterable[str]) -> set[str]:
        """The subset of ``objects`` (typed ids) the principal may view."""
        wanted = list(dict.fromkeys(objects))
        missing = [obj for obj in wanted if obj not in self._answers]
        if missing:
            checks = [can_view(self.principal.subject, obj) for obj in missing]
            try:
                answers = await self.authorizer.batch_check(checks)
            except AuthorizationUnavailable:
                raise
            except Exception as exc:  # any failure of the engine means "cannot decide": fail closed
                raise AuthorizationUnavailable(f"authorization failed: {type(exc).__name__}") from exc
            if len(answers) != len(checks):
                raise AuthorizationUnavailable("authorizer returned the wrong number of answers")
            for check, allowed in zip(checks, answers, strict=True):
                self._answers[check.object] = allowed
                self.records.append(CheckRecord(check.user, check.relation, check.object, allowed))
        return {obj for obj in wanted if self._answers[obj]}

    async def require(self, obj: str) -> None:
        """Raise NotFound unless ``obj`` is visible; the message never says which of the two it was."""
        if obj not in await self.visible([obj]):
            raise NotFound(obj)

    def receipt(self) -> dict[str, object]:
        """The audit record of this request. Never returned to the caller."""
        denied = sorted(r.object for r in self.records if not r.allowed)
        return {
            "request_id": self.request_id,
            "principal": _digest(self.principal.subject),
            "model_id": self.authorizer.model_id,
            "checks": len(self.records),
            "allowed": len(self.records) - len(denied),
            "denied": len(denied),
            "denied_ids": [_digest(obj) for obj in denied],
        }


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]
