import pytest

from authz.base import Check
from authz.fake import FakeAuthorizer
from authz.gate import Gate
from core.errors import AuthorizationUnavailable, NotFound
from core.models import Principal

BOB = Principal(user="bob")


def gate_with(*allowed: str, unavailable: bool = False) -> Gate:
    checks = [Check("user:bob", "viewer", obj) for obj in allowed]
    return Gate(FakeAuthorizer(checks, unavailable=unavailable), BOB)


async def test_visible_returns_only_allowed_and_records_every_check():
    gate = gate_with("page:1", "page:3")
    assert await gate.visible(["page:1", "page:2", "page:3"]) == {"page:1", "page:3"}
    assert [(r.object, r.allowed) for r in gate.records] == [("page:1", True), ("page:2", False), ("page:3", True)]
    assert all(r.subject == "user:bob" and r.relation == "viewer" for r in gate.records)


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


async def test_unavailable_authorizer_fails_closed():
    with pytest.raises(AuthorizationUnavailable):
        await gate_with("page:1", unavailable=True).visible(["page:1"])


class Broken:
    model_id = "m"

    def __init__(self, answer):
        self.answer = answer

    async def batch_check(self, checks):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize("answer", [RuntimeError("boom"), [True], [True, True, True]])
async def test_any_engine_failure_or_wrong_answer_count_fails_closed(answer):
    gate = Gate(Broken(answer), BOB)
    with pytest.raises(AuthorizationUnavailable):
        await gate.visible(["page:1", "page:2"])
    assert gate.records == []


async def test_receipt_counts_and_hashes_denied_ids():
    gate = gate_with("page:1")
    await gate.visible(["page:1", "page:secret"])
    receipt = gate.receipt()
    assert receipt["checks"] == 2 and receipt["allowed"] == 1 and receipt["denied"] == 1
    assert "page:secret" not in str(receipt)
    assert "bob" not in str(receipt)
    assert receipt["model_id"] == "fake-model"
