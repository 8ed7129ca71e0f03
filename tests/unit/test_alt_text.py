"""Alt text: Gemini through the real google-genai SDK against a local fake server, and the
offline writer used without a key."""

from __future__ import annotations

import pytest

from core.errors import SourceError
from core.providers.base import ImageContext
from core.providers.gemini import GeminiAltText
from core.settings import GeminiSettings
from devstack.atlassian.runner import serving_app
from devstack.fake_gemini import FakeGemini
from pipeline.alt_text import OFFLINE_PREFIX, OfflineAltText, alt_text_writer, cache_key

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
IMAGE = ImageContext("metastore-arch.png", "image/png", PNG, "Metastore Admin", ("Setup", "Remote mode"), "The diagram below shows the remote metastore. [image] Clients connect over Thrift.", "arch")


@pytest.fixture
def gemini():
    fake = FakeGemini()
    with serving_app(fake.app()) as url:
        yield fake, GeminiSettings(api_key="test-key", base_url=url, max_attempts=3, timeout_s=10)


async def test_gemini_gets_the_image_and_its_context(gemini):
    fake, settings = gemini
    writer = GeminiAltText(settings)
    text = await writer.describe(IMAGE)
    assert text == f"A diagram ({len(PNG)} bytes) that illustrates the text around it."
    (call,) = fake.calls
    assert call.image == PNG and call.media_type == "image/png" and call.model.endswith(settings.model)
    for context in ("Metastore Admin", "Setup › Remote mode", "remote metastore", "Clients connect over Thrift", "arch"):
        assert context in call.prompt


async def test_gemini_is_retried_on_429_and_5xx(gemini):
    fake, settings = gemini
    fake.failures = [429, 503]
    writer = GeminiAltText(settings.model_copy(update={"max_attempts": 3}))
    assert (await writer.describe(IMAGE)).startswith("A diagram")
    assert writer.calls == 3 and len(fake.calls) == 1


async def test_gemini_failing_for_good_is_a_clear_error(gemini):
    fake, settings = gemini
    fake.failures = [500, 500]
    with pytest.raises(SourceError, match=r"Gemini \(gemini-2.5-flash\) could not describe metastore-arch.png: 500"):
        await GeminiAltText(settings.model_copy(update={"max_attempts": 2})).describe(IMAGE)


async def test_without_a_key_alt_text_is_written_offline_and_says_so():
    writer = alt_text_writer(GeminiSettings())
    assert isinstance(writer, OfflineAltText)
    text = await writer.describe(IMAGE)
    assert text.startswith(OFFLINE_PREFIX)
    assert "metastore arch" in text and "'arch'" in text and "Setup › Remote mode" in text and "remote metastore" in text


def test_the_cache_key_changes_with_the_context_not_with_nothing():
    same = cache_key(IMAGE, "gemini")
    assert cache_key(IMAGE, "gemini") == same
    moved = ImageContext(**{**IMAGE.__dict__, "context": "A different paragraph. [image]"})
    assert cache_key(moved, "gemini")[0] == same[0] and cache_key(moved, "gemini")[1] != same[1]
    assert cache_key(IMAGE, "offline") != same
