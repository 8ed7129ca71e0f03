"""The lexical channel: BM25 over chunks, the page title counted in each chunk."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrievers.lexical import LexicalEntry, LexicalIndex

ENTRIES = {
    "a-0": LexicalEntry("page:a", "Configuration Properties\nSet hive.server2.authentication to LDAP."),
    "a-1": LexicalEntry("page:a", "Configuration Properties\nThe metastore keeps table definitions."),
    "b-0": LexicalEntry("page:b", "Correlation Optimizer\nMerges correlated operators into one job."),
    "c-0": LexicalEntry("page:c", "Getting Started\nInstall Hive and start the metastore service."),
}


def test_an_exact_identifier_ranks_its_chunk_first() -> None:
    found = LexicalIndex(ENTRIES).search("which value for hive.server2.authentication?", 3)
    assert found[0][:2] == ("a-0", "page:a")
    assert all(score > 0 for _, _, score in found)
    assert [s for _, _, s in found] == sorted((s for _, _, s in found), reverse=True)


def test_the_title_counts_in_every_chunk_of_its_page() -> None:
    found = LexicalIndex(ENTRIES).search("correlation optimizer design", 5)
    assert [doc for _, doc, _ in found] == ["page:b"]
    # "configuration" is only in the title of page:a, and reaches both its chunks
    assert {cid for cid, _, _ in LexicalIndex(ENTRIES).search("configuration", 5)} == {"a-0", "a-1"}


def test_nothing_for_words_no_chunk_holds_or_stopwords_alone() -> None:
    index = LexicalIndex(ENTRIES)
    assert index.search("quuxplonk", 5) == []
    assert index.search("the and of", 5) == []
    assert LexicalIndex().search("metastore", 5) == []


def test_within_searches_only_the_chunks_of_those_documents() -> None:
    index = LexicalIndex(ENTRIES)
    assert {doc for _, doc, _ in index.search("metastore", 5)} == {"page:a", "page:c"}
    assert [doc for _, doc, _ in index.search("metastore", 5, within={"page:c", "page:unknown"})] == ["page:c"]
    assert index.search("metastore", 5, within=set()) == []
    assert index.doc_of("a-0") == "page:a" and index.doc_of("nowhere") is None


def test_within_scores_as_an_index_of_those_documents_alone() -> None:
    """Term rarity and chunk length are counted over the documents searched: pages outside them
    (the caller's hidden ones) do not move the ranking of those inside."""
    seen = {
        "v-1": LexicalEntry("page:v1", "Notes\nalpha gamma gamma"),
        "v-2": LexicalEntry("page:v2", "Notes\nbeta gamma"),
        "v-3": LexicalEntry("page:v3", "Notes\nalpha delta delta delta"),
        "v-4": LexicalEntry("page:v4", "Notes\nalpha epsilon"),
    }
    hidden = {f"h-{n}": LexicalEntry(f"page:h{n}", "Secret\nbeta zeta " + "zeta " * n) for n in range(6)}
    index = LexicalIndex(seen | hidden)
    within = {entry.doc_id for entry in seen.values()}
    # Across everything, "beta" is common (the hidden pages) and "alpha" rare; among the pages
    # searched it is the other way round.
    assert index.search("alpha beta", 10)[0][1] != "page:v2"
    found = index.search("alpha beta", 10, within=within)
    alone = LexicalIndex(seen).search("alpha beta", 10)
    assert found[0][1] == "page:v2"
    assert [hit[:2] for hit in found] == [hit[:2] for hit in alone]
    assert all(abs(a[2] - b[2]) < 1e-5 for a, b in zip(found, alone, strict=True))


def test_term_weights_are_counted_over_the_documents_searched() -> None:
    """The query's terms with their IDF, as an index of the documents searched alone gives them:
    a term only hidden pages hold is not one of them."""
    seen = {"v-1": LexicalEntry("page:v1", "Notes\nalpha beta"), "v-2": LexicalEntry("page:v2", "Notes\nalpha gamma")}
    hidden = {f"h-{n}": LexicalEntry(f"page:h{n}", "Secret\nbeta zeta") for n in range(4)}
    index = LexicalIndex(seen | hidden)
    query = "the alpha, beta and zeta of quuxplonk"
    everywhere = index.term_weights(query)
    assert set(everywhere) == {"alpha", "beta", "zeta"} and everywhere["alpha"] > everywhere["beta"]
    among = index.term_weights(query, within={"page:v1", "page:v2"})
    assert among == pytest.approx(LexicalIndex(seen).term_weights(query))
    assert set(among) == {"alpha", "beta"} and among["beta"] > among["alpha"]
    assert index.term_weights(query, within=set()) == {} and LexicalIndex().term_weights(query) == {}


def test_replace_drops_every_chunk_of_a_document(tmp_path: Path) -> None:
    index = LexicalIndex(ENTRIES)
    assert {doc for _, doc, _ in index.search("metastore", 5)} == {"page:a", "page:c"}
    index.replace(["page:a"], {"d-0": LexicalEntry("page:d", "Metastore Admin\nSchema tool.")})
    assert {doc for _, doc, _ in index.search("metastore", 5)} == {"page:c", "page:d"}
    assert index.doc_ids == {"page:b", "page:c", "page:d"}
    path = tmp_path / "lexical.json"
    index.save(path)
    again = LexicalIndex.load(path)
    assert again is not None and again.search("metastore", 5) == index.search("metastore", 5)


def test_an_unreadable_file_loads_as_nothing(tmp_path: Path) -> None:
    assert LexicalIndex.load(tmp_path / "missing.json") is None
    (tmp_path / "broken.json").write_text("{not json")
    assert LexicalIndex.load(tmp_path / "broken.json") is None


def test_a_chunk_is_given_back_without_its_title_line() -> None:
    assert LexicalIndex(ENTRIES).chunk_text("b-0") == "Merges correlated operators into one job."
