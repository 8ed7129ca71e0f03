"""LightRAG 1.5.7's text-mode extraction records, written by an ``Extractor`` instead of an LLM.

``local_llm_func`` stands in for the LLM in LightRAG's *extract* role: it answers the
entity-extraction prompt by running an ``Extractor`` on the chunk text and rendering its entities
and relations as LightRAG's records, answers the gleaning prompt with nothing new and the
description-summary prompt by joining and truncating the descriptions. Anything else (answer
generation, query keywords) is refused: query time never needs an LLM because keywords come from
``Extractor.keywords``. This module knows LightRAG's prompt and record formats but does not import
LightRAG: the adapter passes LightRAG's own delimiters.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from typing import Any

from core.errors import ConfigurationError
from core.providers.base import Extraction, Extractor
from core.providers.local import RegexTokenizer, clean_text

# LightRAG 1.5.7's text-mode record format (``PROMPTS["DEFAULT_TUPLE_DELIMITER"]`` etc.). The
# adapter passes LightRAG's own values; these defaults serve tests.
TUPLE_DELIMITER = "<|#|>"
COMPLETION_DELIMITER = "<|COMPLETE|>"

# LightRAG's text-mode parser splits a response into records at "\n" and at the completion
# delimiter, re-splits a record at "<d>entity<d>" / "<d>relation<d>" / "<d>relationship<d>" (its
# recovery for records glued together), "repairs" anything resembling a damaged delimiter (``<#>``,
# ``<|#|``, ``|#|>``, ``<X|#|Y>``, ``<|>``, ``<||``, ``<|#|>|`` …, see
# ``lightrag.utils.fix_tuple_delimiter_corruption``) and drops empty fields. Field text must
# therefore contain no newline and no "|" (every delimiter pattern but ``<#>`` needs one), no
# ``<core>``, no "<" at its end or ">" at its start (``<.?|#|.?>`` swallows them), never be empty,
# and never be exactly one of these words:
_RECORD_WORDS = frozenset({"entity", "relation", "relationship"})
_PIPE = "\u00a6"  # "¦" broken bar: reads like "|" in tables and code, means nothing to the parser


@functools.lru_cache(maxsize=8)
def _bare_core(delimiter_core: str) -> re.Pattern[str]:
    return re.compile(rf"<({re.escape(delimiter_core)})>", re.IGNORECASE)


def _safe_field(raw: str, fallback: str = "", delimiter_core: str = "#") -> str:
    """``raw`` on one line, with nothing LightRAG's record parser reads as structure.

    Risky characters are replaced by look-alikes rather than dropped, so the text keeps its
    meaning; an empty field becomes ``fallback`` (the parser drops empty fields, shifting the rest).
    """
    text = " ".join(raw.split()).replace("|", _PIPE)
    if delimiter_core:
        text = _bare_core(delimiter_core).sub("\u2039\\1\u203a", text)  # <#> -> ‹#›
    if text.endswith("<"):
        text = text[:-1] + "\u2039"
    if text.startswith(">"):
        text = "\u203a" + text[1:]
    if text in _RECORD_WORDS:
        text = text.capitalize()
    return text or fallback


def render_extraction(
    extraction: Extraction,
    tuple_delimiter: str = TUPLE_DELIMITER,
    completion_delimiter: str = COMPLETION_DELIMITER,
) -> str:
    """The extraction as LightRAG's text-mode records: entity rows, relation rows, completion.

    Every field goes through ``_safe_field``, so each row parses back as one record with all its
    fields; rows whose entity name is empty are left out (LightRAG would drop them anyway).
    """
    d = tuple_delimiter
    core = d[2:-2] if d.startswith("<|") and d.endswith("|>") else ""
    rows: list[str] = []
    for name, kind, desc in extraction.entities:
        name = _safe_field(name, "", core)
        if name:
            kind, desc = _safe_field(kind, "other", core), _safe_field(clean_text(desc), name, core)
            rows.append(d.join(("entity", name, kind, desc)))
    for src, tgt, keywords, desc in extraction.relations:
        src, tgt = _safe_field(src, "", core), _safe_field(tgt, "", core)
        if src and tgt:
            keywords = _safe_field(keywords, "mentioned together", core)
            desc = _safe_field(clean_text(desc), f"{src} and {tgt}", core)
            rows.append(d.join(("relation", src, tgt, keywords, desc)))
    rows.append(completion_delimiter)
    return "\n".join(rows)


# Markers of LightRAG 1.5.7's prompts (lightrag/prompt.py). A template change upstream makes
# ``local_llm_func`` refuse loudly instead of answering the wrong question.
_EXTRACTION_TASK = "Extract entities and relationships from the `---Input Text---` section below."
_GLEANING_TASK = "Based on the last extraction task, identify and extract any missed"
_SUMMARY_TASK = "synthesize a list of descriptions"
_INPUT_TEXT = re.compile(r"---Input Text---\n```\n(.*)\n```\s*\n---Output---", re.DOTALL)
_DESCRIPTION_LIST = re.compile(r"Description List:\s*\n```\n(.*)\n```", re.DOTALL)
_SUMMARY_LIMIT = re.compile(r"must not exceed (\d+) tokens")


def summarize_descriptions(prompt: str) -> str:
    """Answer the description-merge prompt: distinct descriptions in order, cut to the limit."""
    block = _DESCRIPTION_LIST.search(prompt)
    if block is None:
        raise ConfigurationError("summary prompt without a description list")
    descriptions = []
    for line in block.group(1).splitlines():
        if line.strip():
            descriptions.append(str(json.loads(line).get("Description", "")).strip())
    merged = "\n".join(dict.fromkeys(d for d in descriptions if d))
    limit = _SUMMARY_LIMIT.search(prompt)
    if limit is not None:
        tokenizer = RegexTokenizer()
        tokens = tokenizer.encode(merged)
        if len(tokens) > int(limit.group(1)):
            merged = tokenizer.decode(tokens[: int(limit.group(1))]).rstrip() + " …"
    return merged


async def local_llm_func(
    prompt: str,
    system_prompt: str | None = None,
    history_messages: list[dict[str, str]] | None = None,
    *,
    extractor: Extractor,
    tuple_delimiter: str = TUPLE_DELIMITER,
    completion_delimiter: str = COMPLETION_DELIMITER,
    **_kwargs: Any,
) -> str:
    """LightRAG ``llm_model_func`` for the *extract* role, backed by ``extractor``.

    Bind ``extractor`` (and LightRAG's delimiters) with ``functools.partial``. Other keyword
    arguments LightRAG passes (``hashing_kv``, ``response_format``, ``max_tokens``…) are ignored.
    """
    if _GLEANING_TASK in prompt:
        return completion_delimiter  # the extractor is deterministic: a second pass adds nothing
    if _EXTRACTION_TASK in prompt:
        match = _INPUT_TEXT.search(prompt)
        if match is None or "JSON" in prompt.split("---Input Text---")[0]:
            raise ConfigurationError("local_llm_func answers only LightRAG's text-mode extraction prompt")
        extraction = await asyncio.to_thread(extractor.extract, match.group(1))
        return render_extraction(extraction, tuple_delimiter, completion_delimiter)
    if _SUMMARY_TASK in prompt:
        return summarize_descriptions(prompt)
    raise ConfigurationError(
        "local_llm_func answers only LightRAG's entity-extraction, gleaning and description-summary "
        "prompts; it was asked something else (answer generation or query keywords?). Query time "
        "must pass hl_keywords/ll_keywords and use aquery_data, which needs no LLM."
    )
