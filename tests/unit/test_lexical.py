"""The lexical channel: BM25 over chunks, the page title counted in each chunk."""

from __future__ import annotations

from pathlib import Path

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


def test_within_searches_only_the_chunks_of_those_documents_with_their_own_scores() -> None:
    index = LexicalIndex(ENTRIES)
    everything = index.search("metastore", 5)
    assert {doc for _, doc, _ in everything} == {"page:a", "page:c"}
    assert index.search("metastore", 5, within={"page:c", "page:unknown"}) == [hit for hit in everything if hit[1] == "page:c"]
    assert index.search("metastore", 5, within=set()) == []
    assert index.doc_of("a-0") == "page:a" and index.doc_of("nowhere") is None


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
