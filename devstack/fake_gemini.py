"""A local stand-in for the Gemini API's ``generateContent``, for tests: the real google-genai SDK
talks to it through ``HttpOptions(base_url=…)``. It records each request (image bytes, prompt) and
answers with a description built from them, after any injected failures (429, 500, 503)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


@dataclass
class GeminiCall:
    model: str
    prompt: str
    media_type: str
    image: bytes


@dataclass
class FakeGemini:
    calls: list[GeminiCall] = field(default_factory=list)
    failures: list[int] = field(default_factory=list)  # statuses to answer with first, in order

    def app(self) -> Starlette:
        async def generate(request: Request) -> JSONResponse:
            path = request.path_params["rest"]
            if not path.endswith(":generateContent"):
                return JSONResponse({"error": {"code": 404, "message": "not emulated", "status": "NOT_FOUND"}}, 404)
            if self.failures:
                status = self.failures.pop(0)
                return JSONResponse({"error": {"code": status, "message": "injected", "status": "UNAVAILABLE"}}, status)
            body = await request.json()
            parts = [part for content in body.get("contents", []) for part in content.get("parts", [])]
            inline = next((p.get("inlineData") or p.get("inline_data") for p in parts if p.get("inlineData") or p.get("inline_data")), {})
            prompt = "\n".join(p["text"] for p in parts if "text" in p)
            image = base64.b64decode(inline.get("data", ""))
            self.calls.append(GeminiCall(path.removesuffix(":generateContent"), prompt, inline.get("mimeType") or inline.get("mime_type", ""), image))
            text = f"A diagram ({len(image)} bytes) that illustrates the text around it."
            return JSONResponse(
                {
                    "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
                }
            )

        return Starlette(routes=[Route("/{version}/models/{rest:path}", generate, methods=["POST"])])
