"""The offline extractor on real Hive pages: the entities a reader would name are found, and none
is named after Markdown syntax (``Label](page:123``), a URL, an attachment id, a formula or the
keywords of a code block."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from core.providers.local import LocalExtractor, prose
from tests.unit.test_extraction_corpus import chunks_of, load_pages

GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "entities.json").read_text())
NOT_A_NAME = re.compile(r"\]\(|\[|https?:|\bpage:|\bimage:|\batt\d+\b|\\|\$|`")


@pytest.fixture(scope="module")
async def extracted() -> dict[str, set[str]]:
    extractor = LocalExtractor()
    names: dict[str, set[str]] = {}
    for page_id, text in await load_pages(set(GOLDEN["pages"])):
        names[page_id] = {name for chunk in chunks_of(text) for name, _kind, _desc in extractor.extract(chunk).entities}
    return names


async def test_the_golden_entities_are_found(extracted: dict[str, set[str]]) -> None:
    for page_id, expected in GOLDEN["pages"].items():
        assert set(expected) <= extracted[page_id], (page_id, sorted(set(expected) - extracted[page_id]))


async def test_no_entity_is_named_after_markup_links_or_code(extracted: dict[str, set[str]]) -> None:
    for page_id, names in extracted.items():
        assert not [n for n in names if NOT_A_NAME.search(n) or n.count("(") != n.count(")")], page_id
        assert not names & set(GOLDEN["never"]), page_id


def test_prose_keeps_link_labels_and_identifiers_and_drops_the_rest() -> None:
    text = (
        "See [Correlation Optimizer](page:34019487) and ![figure](image:att34177453), or "
        "https://example.org/x. Set `hive.optimize.correlation`; run `SELECT 1 FROM t`. TBLS.TBL\\_ID\n"
        "```sql\nSELECT a FROM t1;\n```\nThe formula $$V(R1)$$ holds."
    )
    assert prose(text).split() == [
        "See", "Correlation", "Optimizer", "and", ",", "or", "Set", "hive.optimize.correlation;", "run", ".",
        "TBLS.TBL_ID", "The", "formula", "holds.",
    ]  # fmt: skip


def test_a_chunk_that_starts_inside_a_code_block_loses_that_code() -> None:
    chunk = "       GROUP BY key) tmp1\nJOIN t2 ON (tmp1.key = t2.key);\n```\n\nThis plan uses three MapReduce jobs to evaluate this query today.\n\n```\nSELECT * FROM t3;\n```\nMore prose follows here about the optimizer and its plans."
    assert prose(chunk).split() == "This plan uses three MapReduce jobs to evaluate this query today. More prose follows here about the optimizer and its plans.".split()


def test_the_label_of_a_link_to_a_page_names_an_entity() -> None:
    extraction = LocalExtractor().extract("For the REST calls see [WebHCat Reference](page:34015762) and [the guide](https://example.org/g).")
    kinds = {name: kind for name, kind, _ in extraction.entities}
    assert kinds["WebHCat Reference"] == "page"
    assert "guide" not in kinds or kinds["guide"] != "page"
    assert not [name for name in kinds if "page:" in name or "](" in name]
