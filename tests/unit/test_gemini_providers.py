"""Gemini extraction and embeddings through the real google-genai SDK against the local fake
server: structured output, batching, task types, retries, usage and cost, and the switch."""

from __future__ import annotations

import json
import time
from contextlib import closing

import numpy as np
import pytest

from core.errors import ConfigurationError, SourceError
from core.providers.base import Usage
from core.providers.gemini import GeminiAltText, GeminiEmbedder, GeminiExtractor
from core.providers.local import LocalEmbedder, LocalExtractor
from core.settings import GeminiSettings, Settings
from devstack.atlassian.runner import serving_app
from devstack.fake_gemini import FakeGemini, bag_of_words
from retrievers.factory import providers

PASSAGE = "HiveServer2 serves JDBC clients. The Metastore keeps hive.metastore.uris in MySQL."


@pytest.fixture
def gemini():
    fake = FakeGemini()
    with serving_app(fake.app()) as url:
        yield fake, GeminiSettings(api_key="test-key", base_url=url, max_attempts=3, timeout_s=10, extraction_model="gemini-2.5-flash-lite")


def test_extraction_is_structured_output_read_back_as_entities_and_relations(gemini):
    fake, settings = gemini
    with closing(GeminiExtractor(settings)) as extractor:
        extraction = extractor.extract(PASSAGE)
    names = [name for name, _kind, _description in extraction.entities]
    assert names == ["HiveServer2", "JDBC", "Metastore", "hive.metastore.uris", "MySQL"]
    assert ("HiveServer2", "JDBC", "mentioned together", "HiveServer2 serves JDBC clients.") in extraction.relations
    (call,) = fake.calls
    assert call.kind == "extract" and call.model == "gemini-2.5-flash-lite" and call.prompt == PASSAGE


def test_an_answer_is_kept_only_where_it_fits_the_passage(gemini):
    fake, settings = gemini
    fake.answers = [
        json.dumps(
            {
                "entities": [
                    {"name": " Hive  Server ", "type": "artifact", "description": "the server"},
                    {"name": "hive server", "type": "concept", "description": "the same name again"},
                    {"name": "", "type": "other", "description": "nameless"},
                    {"name": "Beeline", "type": "artifact", "description": "the client"},
                ],
                "relations": [
                    {"source": "Beeline", "target": "hive  server", "keywords": "connects", "description": "Beeline connects."},
                    {"source": "Beeline", "target": "Kerberos", "keywords": "uses", "description": "not an entity"},
                    {"source": "Beeline", "target": "Beeline", "keywords": "self", "description": "a loop"},
                ],
            }
        )
    ]
    with closing(GeminiExtractor(settings)) as extractor:
        extraction = extractor.extract("Beeline connects to Hive Server.")
    assert extraction.entities == [("Hive Server", "artifact", "the server"), ("Beeline", "artifact", "the client")]
    assert extraction.relations == [("Beeline", "Hive Server", "connects", "Beeline connects.")]


def test_json_that_does_not_fit_the_schema_is_a_clear_error(gemini):
    fake, settings = gemini
    fake.answers = ['{"entities": [{"name": "x"}]}']
    with closing(GeminiExtractor(settings)) as extractor:
        with pytest.raises(SourceError, match=r"gemini-2.5-flash-lite.*does not fit the schema"):
            extractor.extract("Some text.")


def test_prefetch_starts_extraction_before_it_is_asked_for(gemini):
    fake, settings = gemini
    texts = [f"Component{i} talks to Service{i}." for i in range(6)]
    with closing(GeminiExtractor(settings)) as extractor:
        extractor.prefetch(texts)
        deadline = time.monotonic() + 10
        while len(fake.calls) < len(texts) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sorted(call.prompt for call in fake.calls) == sorted(texts)  # all sent, none asked for yet
        assert [e[0] for e in extractor.extract(texts[3]).entities] == ["Component3", "Service3"]
        assert len(fake.calls) == len(texts)  # the answer was the prefetched one


def test_query_keywords_are_asked_once_per_question_and_degrade_when_gemini_fails(gemini, caplog):
    fake, settings = gemini
    extractor = GeminiExtractor(settings.model_copy(update={"max_attempts": 1}))
    high, low = extractor.keywords("How does HiveServer2 authenticate with Kerberos?")
    assert low == ["HiveServer2", "Kerberos"] and "authenticate" in high
    assert extractor.keywords("How does HiveServer2 authenticate with Kerberos?") == (high, low)
    assert [call.kind for call in fake.calls] == ["keywords"]

    fake.failures = [503]
    assert extractor.keywords("beeline timeout") == (["beeline timeout"], ["beeline timeout"])
    assert "query keywords unavailable" in caplog.text
    # the fallback was not remembered: the question is asked again once Gemini answers
    assert extractor.keywords("beeline timeout") == (["beeline", "timeout"], ["beeline", "timeout"])
    assert [call.kind for call in fake.calls] == ["keywords", "keywords"]


async def test_embeddings_are_batched_in_order_with_the_task_type_and_size(gemini):
    fake, settings = gemini
    embedder = GeminiEmbedder(settings.model_copy(update={"embedding_dim": 256}))
    texts = [f"passage number {i} about partition {i % 7}" for i in range(230)]
    vectors = await embedder.embed(texts)
    assert vectors.shape == (230, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[137], bag_of_words(texts[137], 256), atol=1e-6)  # rows stay with their texts
    batches = [call for call in fake.calls if call.kind == "embed"]
    assert sorted(len(call.texts) for call in batches) == [30, 100, 100]
    assert {(call.task_type, call.dim, call.model) for call in batches} == {("RETRIEVAL_DOCUMENT", 256, "gemini-embedding-001")}

    await embedder.embed(["where is the metastore"], query=True)
    assert fake.calls[-1].task_type == "RETRIEVAL_QUERY"
    assert embedder.name == "gemini:gemini-embedding-001@256" and embedder.dim == 256
    assert (await embedder.embed([])).shape == (0, 256)


async def test_embeddings_of_the_wrong_size_are_refused(gemini):
    fake, settings = gemini
    fake.embedding_dim = 128
    with pytest.raises(SourceError, match=r"expected 768 each \(WAYFINDER_GEMINI__EMBEDDING_DIM\)"):
        await GeminiEmbedder(settings).embed(["a passage"])


async def test_429_and_5xx_are_retried_and_failing_for_good_names_the_model(gemini):
    fake, settings = gemini
    fake.failures = [429, 500]
    embedder = GeminiEmbedder(settings)
    assert (await embedder.embed(["retried"])).shape == (1, 768)
    assert embedder._gemini.calls == 3 and len(fake.calls) == 1

    fake.failures = [503, 503, 503]
    with closing(GeminiExtractor(settings)) as extractor:
        with pytest.raises(SourceError, match=r"Gemini \(gemini-2.5-flash-lite\) could not extract entities: 503"):
            extractor.extract("Never answered.")


async def test_every_role_writes_its_tokens_to_one_ledger_and_the_cost_is_estimated(gemini):
    fake, settings = gemini
    usage = Usage()
    with closing(GeminiExtractor(settings, usage)) as extractor:
        extractor.extract(PASSAGE)
    await GeminiEmbedder(settings, usage).embed(["x" * 400, "y" * 400])
    from tests.unit.test_alt_text import IMAGE

    await GeminiAltText(settings, usage).describe(IMAGE)
    flash, lite, embed = usage.models["gemini-2.5-flash"], usage.models["gemini-2.5-flash-lite"], usage.models["gemini-embedding-001"]
    assert (flash.calls, lite.calls, embed.calls) == (1, 1, 1)
    assert lite.input_tokens > 0 and lite.output_tokens > 0 and not lite.estimated
    assert embed.input_tokens == 2 * (400 // 4) + 2 and embed.estimated and embed.output_tokens == 0
    prices = {"gemini-2.5-flash": (1.0, 2.0), "gemini-2.5-flash-lite": (0.5, 4.0), "gemini-embedding-001": (0.25, 0.0)}
    cost, unpriced = usage.cost_usd(prices)
    expected = (flash.input_tokens * 1.0 + flash.output_tokens * 2.0 + lite.input_tokens * 0.5 + lite.output_tokens * 4.0 + embed.input_tokens * 0.25) / 1e6
    assert cost == pytest.approx(expected) and unpriced == []
    line = usage.summary({"gemini-2.5-flash": (1.0, 2.0)})
    assert "gemini-embedding-001: 1 call(s), ~202 in / 0 out tokens" in line
    assert "(no price for gemini-2.5-flash-lite, gemini-embedding-001)" in line
    assert Usage().summary(prices) is None


def test_one_setting_switches_the_index_providers():
    embedder, extractor = providers(Settings(providers="local"))
    assert isinstance(embedder, LocalEmbedder) and isinstance(extractor, LocalExtractor)
    embedder, extractor = providers(Settings(providers="gemini", gemini={"api_key": "k", "embedding_dim": 1536}))
    assert isinstance(embedder, GeminiEmbedder) and isinstance(extractor, GeminiExtractor)
    assert embedder.name == "gemini:gemini-embedding-001@1536"
    with pytest.raises(ConfigurationError, match="WAYFINDER_GEMINI__API_KEY is required for Gemini embeddings"):
        providers(Settings(providers="gemini"))
