"""Alt text for the images of converted pages, cached by (image hash, context hash).

The writer is Gemini when a key is configured (:mod:`core.providers.gemini`); without one,
:class:`OfflineAltText` builds the text from the caption, the file name and the surrounding text
and says so. A cached text is reused for the same image in the same context, so an unchanged page
costs no call, and a changed paragraph around an image asks again.
"""

from __future__ import annotations

import hashlib
import json
import re

from core.providers.base import AltTextWriter, ImageContext, Usage
from core.settings import GeminiSettings

OFFLINE_PREFIX = "[alt text written offline] "


class OfflineAltText:
    """Alt text from what the page already says about the image."""

    source = "offline"

    async def describe(self, image: ImageContext) -> str:
        name = re.sub(r"[_-]+", " ", image.filename.rsplit(".", 1)[0]).strip()
        parts = [f"Image {name!r}" if not name.isdigit() else "Image"]
        if image.caption:
            parts.append(f"captioned {image.caption!r}")
        if image.heading_path:
            parts.append(f"in the section {' › '.join(image.heading_path)!r}")
        text = " ".join(parts) + f" of the page {image.page_title!r}."
        around = " ".join(image.context.replace("[image]", " ").split())
        if around:
            text += f" Nearby text: {around[:240]}"
        return OFFLINE_PREFIX + text


def alt_text_writer(settings: GeminiSettings, usage: Usage | None = None) -> AltTextWriter:
    if settings.api_key is None:
        return OfflineAltText()
    from core.providers.gemini import GeminiAltText  # the SDK is loaded only when it is used

    return GeminiAltText(settings, usage)


def cache_key(image: ImageContext, source: str) -> tuple[str, str]:
    """(image hash, context hash): the same picture in the same place gets the same text."""
    image_hash = hashlib.sha256(image.data).hexdigest()
    context = json.dumps([source, image.page_title, list(image.heading_path), image.context, image.caption])
    return image_hash, hashlib.sha256(context.encode()).hexdigest()
