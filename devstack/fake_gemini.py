"""A local stand-in for the Gemini API, for tests: the real google-genai SDK talks to it through
``HttpOptions(base_url=…)``. It serves

* ``models/{model}:generateContent`` — an image with a prompt gets a description built from both
  (alt text); a request with a response schema gets JSON that fits it: entities and relations
  read off the text for an extraction schema (``entities``/``relations``), keywords for a keyword
  schema (``high_level``/``low_level``);
* a request with tools (function declarations) is answered as a scripted agent would: it calls the
  search tool (the first whose name holds ``search``) with the question, then opens (the tool whose
  name holds ``fetch`` or ``get_page``) the first page the search answer names, then answers;
* a request with a verdict schema (``correctness``/``faithful``) gets a grade read off the prompt:
  how many of the reference answer's words the graded answer holds, and of its words the sources;
  one with a leak schema (``leaked``/``facts``) the answer's words that only the hidden pages hold;
* ``models/{model}:batchEmbedContents`` (and ``:embedContent``) — deterministic vectors of the
  requested size from the words of each text (hashed bags of words, normalised), so texts that
  share words are near each other and search over them means something.

Each request is recorded; injected failures (429, 500, 503) are answered first, in order, and
``answers`` (raw JSON texts) replace the next structured answers, to test what the client does
with a model that does not follow the schema. Field names are accepted in camelCase and snake_case,
as the API does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

_WORD = re.compile(r"[A-Za-z0-9][\w.-]*[A-Za-z0-9]|[A-Za-z0-9]")
# what the fake calls an entity: identifiers (dotted, CamelCase, with digits, acronyms) and capitalised words
_ENTITY = re.compile(r"\b(?:[A-Za-z][\w-]*\.[\w.-]*[A-Za-z0-9]|[A-Z][A-Za-z0-9]*[A-Z0-9][A-Za-z0-9]*|[A-Z][a-z]{2,})\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_FUNCTION_WORDS = frozenset("The This That These Those How What When Where Which Why Who It In On For If And But Its".split())


@dataclass
class GeminiCall:
    kind: str  # alt_text | extract | keywords | judge | leak | agent | generate | embed
    model: str
    prompt: str = ""
    media_type: str = ""
    image: bytes = b""
    texts: list[str] = field(default_factory=list)  # embed: the texts
    task_type: str = ""  # embed
    dim: int = 0  # embed: the size asked for


def _get(data: dict[str, Any], camel: str) -> Any:
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()
    return data.get(camel, data.get(snake))


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def bag_of_words(text: str, dim: int) -> list[float]:
    """The fake's embedding: each lower-cased word adds ±1 at a hashed position."""
    vector = np.zeros(dim, dtype=np.float64)
    for word in _words(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        vector[int.from_bytes(digest[:4], "big") % dim] += 1.0 if digest[4] & 1 else -1.0
    norm = np.linalg.norm(vector)
    return (vector / norm if norm else vector).tolist()


def _names(text: str) -> list[str]:
    return list(dict.fromkeys(m.group() for m in _ENTITY.finditer(text) if m.group() not in _FUNCTION_WORDS))


def extraction_of(text: str) -> dict[str, Any]:
    """Entities and relations as a careful reader of this text might list them: the named things
    of each sentence, and a relation between names that follow each other in a sentence."""
    entities: dict[str, dict[str, str]] = {}
    relations: list[dict[str, str]] = []
    for sentence in (s.strip() for s in _SENTENCE.split(text)):
        names = _names(sentence)
        for name in names:
            kind = "artifact" if re.search(r"[.\d]|[a-z][A-Z]|^[A-Z]{2,}$", name) else "concept"
            entities.setdefault(name, {"name": name, "type": kind, "description": sentence[:200]})
        for source, target in zip(names, names[1:]):
            relations.append({"source": source, "target": target, "keywords": "mentioned together", "description": sentence[:200]})
    return {"entities": list(entities.values())[:24], "relations": relations[:24]}


def keywords_of(question: str) -> dict[str, list[str]]:
    names = _names(question)
    themes = [w for w in _words(question.lower()) if len(w) > 3 and w not in {n.lower() for n in names}]
    return {"high_level": themes[:5], "low_level": names[:8]}


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in _words(text) if len(w) >= 4}  # past the, and, for: the words that carry facts


def _section(prompt: str, name: str, following: str) -> str:
    found = re.search(rf"{name}:\s*(.*?)\n\s*(?:{following}):", prompt, re.S)
    return found.group(1) if found else ""


def verdict_of(prompt: str) -> dict[str, Any]:
    """A judge's verdict, by words shared: the reference's in the answer, the answer's in the sources."""
    reference = _content_words(_section(prompt, "Reference answer", "Sources"))
    sources = _content_words(_section(prompt, "Sources", "Answer to grade") + _section(prompt, "Question", "Reference answer"))
    answer = _content_words(prompt.rpartition("Answer to grade:")[2])
    held = len(reference & answer) / (len(reference) or 1)
    correctness = "correct" if held >= 0.5 else "partial" if held >= 0.2 else "wrong"
    faithful = len(answer - sources) <= max(1, len(answer) // 5)
    return {"correctness": correctness, "faithful": faithful, "reason": f"{held:.0%} of the reference's words"}


def leak_of(prompt: str) -> dict[str, Any]:
    """A leak check, by words: those of the answer that only the hidden pages hold."""
    allowed = _content_words(_section(prompt, "Question", "Visible sources") + _section(prompt, "Visible sources", "Hidden pages"))
    hidden = _content_words(_section(prompt, "Hidden pages", "Answer"))
    facts = sorted((_content_words(prompt.rpartition("\nAnswer:")[2]) & hidden) - allowed)
    return {"leaked": bool(facts), "facts": facts}


def _error(status: int, message: str) -> JSONResponse:
    names = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
    return JSONResponse({"error": {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}}, status)


def _usage(prompt: str, answer: str) -> dict[str, int]:
    prompt_tokens, answer_tokens = len(_words(prompt)) + 1, len(_words(answer)) + 1
    return {"promptTokenCount": prompt_tokens, "candidatesTokenCount": answer_tokens, "totalTokenCount": prompt_tokens + answer_tokens}


@dataclass
class FakeGemini:
    calls: list[GeminiCall] = field(default_factory=list)
    failures: list[int] = field(default_factory=list)  # statuses to answer with first, in order
    answers: list[str] = field(default_factory=list)  # raw texts for the next structured answers
    embedding_dim: int | None = None  # answer embeddings of this size, whatever was asked

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{version}/models/{rest:path}", self._route, methods=["POST"])])

    async def _route(self, request: Request) -> JSONResponse:
        path = request.path_params["rest"]
        model, _, method = path.partition(":")
        if method not in ("generateContent", "batchEmbedContents", "embedContent"):
            return _error(404, f"{method or path} is not emulated")
        if self.failures:
            return _error(self.failures.pop(0), "injected failure")
        body = await request.json()
        if method == "generateContent":
            return self._generate(model, body)
        requests = _get(body, "requests") if method == "batchEmbedContents" else [body]
        return self._embed(model, requests or [], batch=method == "batchEmbedContents")

    def _generate(self, model: str, body: dict[str, Any]) -> JSONResponse:
        parts = [part for content in _get(body, "contents") or [] for part in _get(content, "parts") or []]
        prompt = "\n".join(p["text"] for p in parts if "text" in p)
        system = "\n".join(p.get("text", "") for p in _get(_get(body, "systemInstruction") or {}, "parts") or [])
        inline = next((_get(p, "inlineData") for p in parts if _get(p, "inlineData")), None)
        config = _get(body, "generationConfig") or {}
        schema = _get(config, "responseSchema") or _get(config, "responseJsonSchema")
        tools = [d for tool in _get(body, "tools") or [] for d in _get(tool, "functionDeclarations") or []]
        if tools:
            return self._agent_turn(model, body, tools, f"{system}\n{prompt}")
        if inline is not None:
            image = base64.b64decode(inline.get("data", ""))
            self.calls.append(GeminiCall("alt_text", model, prompt, _get(inline, "mimeType") or "", image))
            text = f"A diagram ({len(image)} bytes) that illustrates the text around it."
        elif schema is not None:
            properties = set((schema.get("properties") or {}).keys())
            if {"entities", "relations"} <= properties:
                kind, answer = "extract", extraction_of(prompt)
            elif {"high_level", "low_level"} <= properties:
                kind, answer = "keywords", keywords_of(prompt)
            elif {"correctness", "faithful"} <= properties:
                kind, answer = "judge", verdict_of(prompt)
            elif {"leaked", "facts"} <= properties:
                kind, answer = "leak", leak_of(prompt)
            else:
                return _error(400, f"the fake knows no schema with the properties {sorted(properties)}")
            self.calls.append(GeminiCall(kind, model, prompt))
            text = self.answers.pop(0) if self.answers else json.dumps(answer)
        else:
            self.calls.append(GeminiCall("generate", model, prompt))
            text = "An answer."
        return JSONResponse(
            {
                "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": _usage(f"{system}\n{prompt}", text),
                "modelVersion": model,
            }
        )

    def _agent_turn(self, model: str, body: dict[str, Any], tools: list[dict[str, Any]], prompt: str) -> JSONResponse:
        contents = _get(body, "contents") or []
        question = next((p["text"] for c in contents for p in _get(c, "parts") or [] if "text" in p), "")
        responses = [_get(p, "functionResponse") for c in contents for p in _get(c, "parts") or [] if _get(p, "functionResponse")]
        names = [t["name"] for t in tools]
        search = next((n for n in names if "search" in n), None)
        opener = next((n for n in names if "fetch" in n or "get_page" in n), None)
        self.calls.append(GeminiCall("agent", model, prompt))
        part: dict[str, Any]
        if not responses and search is not None:
            part = {"functionCall": {"name": search, "args": {"query": question}}}
        elif len(responses) == 1 and opener is not None:
            found = re.search(r'"id\\?"\s*:\s*\\?"((?:page:)?\d+)', json.dumps(responses[0]))
            page = found.group(1) if found else "page:0"
            key = "page_id" if "get_page" in opener else "id"
            part = {"functionCall": {"name": opener, "args": {key: page.removeprefix("page:") if key == "page_id" else page}}}
        else:
            part = {"text": "An answer from the page."}
        return JSONResponse(
            {
                "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": _usage(prompt + json.dumps(responses), json.dumps(part)),
                "modelVersion": model,
            }
        )

    def _embed(self, model: str, requests: list[dict[str, Any]], *, batch: bool) -> JSONResponse:
        if not requests:
            return _error(400, "no requests")
        texts = ["\n".join(p.get("text", "") for p in _get(_get(r, "content") or {}, "parts") or []) for r in requests]
        dim = int(_get(requests[0], "outputDimensionality") or 3072)
        self.calls.append(GeminiCall("embed", model, texts=texts, task_type=_get(requests[0], "taskType") or "", dim=dim))
        vectors = [{"values": bag_of_words(text, self.embedding_dim or dim)} for text in texts]
        return JSONResponse({"embeddings": vectors} if batch else {"embedding": vectors[0]})
