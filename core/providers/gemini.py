"""Gemini through google-genai: the one module that imports it.

:class:`GeminiAltText` writes an image's alt text from the image and where it sits — page title,
heading path, the text around it — so that the text says what the image is *for*, not only what
it shows. 429 and 5xx answers are retried with exponential backoff (tenacity).
"""

from __future__ import annotations

import asyncio

import httpx
from google import genai
from google.genai import errors, types
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from core.errors import ConfigurationError, SourceError
from core.providers.base import ImageContext
from core.settings import GeminiSettings

PROMPT = """You write alt text for an image in an internal wiki page, for readers who cannot see it.
Say in one to three sentences what the image shows and what it is for on this page: which point of
the surrounding text it illustrates. Name the components, labels or values it shows that matter.
Answer with the alt text only, no preamble.

Page: {title}
Section: {section}
Text around the image: {context}
Caption or author's alt text: {caption}"""


def _retryable(error: BaseException) -> bool:
    return isinstance(error, errors.APIError) and (error.code == 429 or error.code >= 500)


class GeminiAltText:
    """Alt text by a Gemini model. Construction does no I/O."""

    source = "gemini"

    def __init__(self, settings: GeminiSettings) -> None:
        if settings.api_key is None:
            raise ConfigurationError("WAYFINDER_GEMINI__API_KEY is required for Gemini alt text")
        # The blocking client runs in a worker thread, without keep-alive: every connection is closed
        # when its answer is read (the SDK's async path leaves sockets open after error answers).
        options = types.HttpOptions(timeout=int(settings.timeout_s * 1000), client_args={"limits": httpx.Limits(max_keepalive_connections=0)})
        if settings.base_url:
            options.base_url = settings.base_url
        self._client = genai.Client(api_key=settings.api_key.get_secret_value(), http_options=options)
        self._settings = settings
        self.calls = 0

    async def describe(self, image: ImageContext) -> str:
        prompt = PROMPT.format(
            title=image.page_title,
            section=" › ".join(image.heading_path) or "(top of the page)",
            context=image.context or "(none)",
            caption=image.caption or "(none)",
        )
        contents = [types.Part.from_bytes(data=image.data, mime_type=image.media_type), prompt]
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self._settings.max_attempts),
                wait=wait_exponential_jitter(initial=1, max=30),
                retry=retry_if_exception(_retryable),
                reraise=True,
            ):
                with attempt:
                    self.calls += 1
                    response = await asyncio.to_thread(self._client.models.generate_content, model=self._settings.model, contents=contents)
        except errors.APIError as exc:
            raise SourceError(f"Gemini could not describe {image.filename}: {exc.code} {exc.message}") from exc
        except httpx.HTTPError as exc:  # timeouts and refused connections come through the SDK as they are
            raise SourceError(f"Gemini could not describe {image.filename}: {type(exc).__name__}: {exc}") from exc
        text = " ".join((response.text or "").split())
        if not text:
            raise SourceError(f"Gemini returned no alt text for {image.filename}")
        return text
