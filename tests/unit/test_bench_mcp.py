"""bench-mcp's verdicts: what counts as a leak and what as an error, and the users it adds."""

from __future__ import annotations

import json

from devstack.atlassian.hive import account_id
from devstack.atlassian.site import Site, User
from devstack.bench_mcp import Load, Tally, _judge, _judge_walk, add_load_users
from evals.leaks.canaries import Canary
from evals.leaks.oracle import Oracle
from evals.leaks.suite import Answer

VISIBLE = frozenset({"space:HIVE", "page:111111"})
HIDDEN = {"page:222222"}
CANARIES = (Canary(page_id="page:222222", phrase="zorblat-canary", control="quenfix-control"),)


def ok(data: dict) -> Answer:
    return Answer(None, data, json.dumps({"structured": data}), 0.01)


def refused(text: str) -> Answer:
    return Answer(text, None, json.dumps({"isError": True, "content": [{"text": text}]}), 0.01)


def judged(tool: str, arguments: dict, answer: Answer) -> Tally:
    tally = Tally()
    _judge(tally, "bob", tool, arguments, answer, VISIBLE, HIDDEN, CANARIES)
    return tally


def test_a_hidden_page_refused_as_missing_is_neither_leak_nor_error():
    tally = judged("fetch", {"id": "page:222222"}, refused("not_found: no such page"))
    assert (tally.leaks, tally.errors) == (0, 0)


def test_a_result_for_a_hidden_page_is_a_leak_even_without_its_id():
    tally = judged("get_ancestors", {"id": "page:222222"}, ok({"ancestors": []}))
    assert (tally.leaks, tally.errors) == (1, 0) and "may not see" in tally.examples[0]


def test_a_hidden_id_or_canary_anywhere_in_an_answer_is_a_leak():
    assert judged("search", {"query": "x"}, ok({"hits": [{"snippet": "see page 222222"}]})).leaks == 1
    assert judged("fetch", {"id": "page:111111"}, ok({"markdown": "zorblat-canary"})).leaks == 1
    assert judged("search", {"query": "x"}, ok({"hits": [{"id": "page:111111"}]})).leaks == 0


def test_refusals_that_are_not_the_contract_are_errors():
    assert judged("fetch", {"id": "page:111111"}, refused("not_found: no such page")).errors == 1  # may see it
    assert judged("fetch", {"id": "page:222222"}, refused("unavailable: try again")).errors == 1
    assert judged("search", {"query": "x"}, refused("authorization_unavailable: …")).errors == 1


EVIDENCE = {
    "Open": frozenset({"page:111111"}), "Shared": frozenset({"page:111111", "page:222222"}), "Secret": frozenset({"page:222222"}),
    "Open -> Shared": frozenset({"page:111111"}), "Open -> Secret": frozenset({"page:111111"}),
}


def walked(entity: str, answer: Answer) -> Tally:
    load = Load("u", Oracle.of([], [], None), CANARIES, (), (), (), (), EVIDENCE, tuple(EVIDENCE), {"bob": VISIBLE})
    tally = Tally()
    _judge_walk(tally, "bob", {"entity": entity, "hops": 2, "limit": 20}, answer, VISIBLE, HIDDEN, load)
    return tally


def walk(*neighbours: str) -> Answer:
    item = {"description": "", "hops": 1}
    return ok({
        "entity": {"name": "Open", "evidence": ["page:111111"], **item},
        "entities": [{"name": n, "evidence": ["page:111111"], **item} for n in neighbours],
        "relations": [{"source": "Open", "target": n, "description": "", "evidence": ["page:111111"]} for n in neighbours],
    })


def test_explore_is_judged_by_the_index_record_not_by_the_evidence_it_claims():
    assert (walked("Open", walk()).leaks, walked("Open", walk()).errors) == (0, 0)
    assert walked("Open", walk("Shared")).leaks == 1  # claims page 111111 only, but page 222222 supports it too
    assert walked("Shared", walk()).leaks == 1  # answered for an entity a hidden page supports
    assert walked("Open", ok({"entity": {"name": "Open", "evidence": []}, "entities": [], "relations": [{"source": "Open", "target": "X", "evidence": [], "description": "zorblat-canary"}]})).leaks == 1


def test_explore_refusals_are_the_contract_only_for_what_the_user_may_not_explore():
    assert (walked("Secret", refused("not_found: no such page")).errors, walked("Secret", refused("not_found: x")).leaks) == (0, 0)
    assert walked("Open", refused("not_found: no such page")).errors == 1
    assert walked("Secret", refused("unavailable: try again")).errors == 1


def test_load_users_are_spread_over_committers_users_and_no_group():
    site = Site()
    for login in ("alice", "bob"):
        site.add_user(User(account_id(login), login, login, f"{login}@example.com", f"token-{login}"))
    site.add_group("hive-committers", {account_id("alice")})
    site.add_group("hive-users", {account_id("bob")})
    names = add_load_users(site, 4)
    assert names == ["load-00", "load-01", "load-02", "load-03"]
    assert site.groups_of(account_id("load-00")) == {"hive-committers"}
    assert site.groups_of(account_id("load-01")) == {"hive-users"}
    assert site.groups_of(account_id("load-02")) == set()
    assert site.groups_of(account_id("load-03")) == {"hive-committers"}
