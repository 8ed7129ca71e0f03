import asyncio
import dataclasses
from datetime import UTC, datetime

import pytest

from authz.base import Check
from authz.fake import FakeAuthorizer
from authz.gate import Gate
from authz.tuples import holds_live_grant
from core.errors import AuthorizationUnavailable, NotFound, Unauthenticated
from core.models import Principal

BOB = Principal(user="bob")
AGENT = Principal(user="bob", agent="digest-bot", task="weekly")
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
KEY = b"k" * 32


def gate_with(*allowed: str, unavailable: bool = False, principal: Principal = BOB, grant: bool = False) -> Gate:
    checks = [Check("user:bob", "viewer", obj) for obj in allowed]
    if grant:
        checks.append(holds_live_grant(principal, NOW))
    return Gate(FakeAuthorizer(checks, unavailable=unavailable), principal, clock=lambda: NOW)


async def test_visible_returns_only_allowed_and_records_every_check():
    gate = gate_with("page:1", "page:3")
    assert await gate.visible(["page:1", "page:2", "page:3"]) == {"page:1", "page:3"}
    assert [(r.object, r.allowed) for r in gate.records] == [("page:1", True), ("page:2", False), ("page:3", True)]
    assert all(r.subject == "user:bob" and r.relation == "viewer" for r in gate.records)


def test_a_gate_cannot_be_handed_answers_or_records():
    fields = {f.name: f for f in dataclasses.fields(Gate)}
    assert not fields["records"].init and not fields["_answers"].init
    with pytest.raises(TypeError):
        Gate(FakeAuthorizer(), BOB, records=[])  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Gate(FakeAuthorizer(), BOB, _answers={"page:1": True})  # type: ignore[call-arg]


async def test_answers_are_reused_within_one_request_only():
    gate = gate_with("page:1")
    await gate.visible(["page:1", "page:1"])
    await gate.visible(["page:1"])
    assert len(gate.records) == 1
    assert len(gate.authorizer.calls) == 1
    fresh = Gate(gate.authorizer, BOB)
    await fresh.visible(["page:1"])
    assert len(gate.authorizer.calls) == 2


async def test_require_raises_not_found_for_denied_objects():
    gate = gate_with("page:1")
    await gate.require("page:1")
    with pytest.raises(NotFound) as denied:
        await gate.require("page:2")
    assert str(denied.value) == "page:2"


@pytest.mark.parametrize(
    "bad", ["page:1\n", "page:", "page:1#member", "user:*", "page:" + "1" * 300, "space:a b", "security_level:a b", "security_level:"]
)
async def test_malformed_ids_are_never_sent_and_never_visible(bad):
    gate = gate_with("page:1")
    assert await gate.visible([bad, "page:1"]) == {"page:1"}
    assert [c.object for batch in gate.authorizer.calls for c in batch] == ["page:1"]


async def test_a_security_level_is_asked_like_any_object():
    gate = gate_with("security_level:P.10")
    assert await gate.visible(["security_level:P.10", "security_level:P.11"]) == {"security_level:P.10"}


async def test_unavailable_authorizer_fails_closed():
    with pytest.raises(AuthorizationUnavailable):
        await gate_with("page:1", unavailable=True).visible(["page:1"])


class Broken:
    model_id = "m"

    def __init__(self, answer, delay: float = 0.0):
        self.answer = answer
        self.delay = delay
        self.calls = 0

    async def batch_check(self, checks):
        self.calls += 1
        await asyncio.sleep(self.delay)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer if self.answer is not None else [True] * len(checks)


@pytest.mark.parametrize("answer", [RuntimeError("boom"), [True], [True, True, True]])
async def test_any_engine_failure_or_wrong_answer_count_fails_closed(answer):
    gate = Gate(Broken(answer), BOB)
    with pytest.raises(AuthorizationUnavailable):
        await gate.visible(["page:1", "page:2"])
    assert gate.records == []


async def test_one_deadline_covers_every_round_trip_of_the_request():
    slow = Broken(None, delay=0.06)
    gate = Gate(slow, BOB, deadline_s=0.1)
    assert await gate.visible(["page:1"]) == {"page:1"}  # 0.06 s of the 0.1 s budget
    started = asyncio.get_running_loop().time()
    with pytest.raises(AuthorizationUnavailable, match="longer than 0.1s"):
        await gate.visible(["page:2"])  # would need 0.12 s in all
    assert asyncio.get_running_loop().time() - started < 0.08  # cut at the remaining ~0.04 s
    with pytest.raises(AuthorizationUnavailable):
        await gate.visible(["page:3"])  # budget spent: not even asked
    assert slow.calls == 2


async def test_an_agent_needs_a_live_grant_checked_in_the_same_batch():
    gate = gate_with("page:1", principal=AGENT, grant=True)
    assert await gate.visible(["page:1", "page:2"]) == {"page:1"}
    (batch,) = gate.authorizer.calls
    assert batch[-1] == holds_live_grant(AGENT, NOW) and len(batch) == 3
    assert ("agent:digest-bot", "delegate", "task:weekly", True) in {
        (r.subject, r.relation, r.object, r.allowed) for r in gate.records
    }


async def test_an_agent_without_a_live_grant_gets_nothing():
    gate = gate_with("page:1", principal=AGENT, grant=False)
    with pytest.raises(Unauthenticated, match="no live grant"):
        await gate.visible(["page:1"])


async def test_receipt_counts_and_keys_its_digests():
    gate = gate_with("page:1")
    await gate.visible(["page:1", "page:2"])
    receipt = gate.receipt(KEY)
    assert receipt["checks"] == 2 and receipt["allowed"] == 1 and receipt["denied"] == 1
    assert "page:2" not in str(receipt) and "bob" not in str(receipt)
    assert receipt["model_id"] == "fake-model"
    other = gate.receipt(b"o" * 32)
    assert other["denied_ids"] != receipt["denied_ids"] and other["principal"] != receipt["principal"]
    assert gate.receipt(KEY) == receipt  # stable under one key: receipts can be linked
