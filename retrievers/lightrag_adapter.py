"""The semantic index on LightRAG 1.5.7 — the only module that imports ``lightrag``.

Documents go in with ``ainsert`` (chunking, entity/relation extraction, merge, embeddings); queries
use ``aquery_data`` with keywords from our ``Extractor``, so no LLM runs at query time. Every
entity and relation is mapped back to *all* the documents that support it through LightRAG's
``entity_chunks`` / ``relation_chunks`` tracking stores and ``text_chunks[...].full_doc_id``; the
caller authorizes those documents before showing anything.

LightRAG's sharp edges, and how this module guards them:

* It calls ``load_dotenv(".env")`` when its modules are imported (and backends read
  ``config.ini`` from the working directory): ``python-dotenv`` is disabled while this module
  imports them, and every option we rely on is passed explicitly, so environment variables only
  reach knobs we do not set. Only file-based storages are used; they read neither ``config.ini``
  nor the ``*_WORKSPACE`` variables that override ``workspace`` in server backends.
* ``ENTITY_TYPES`` in the environment makes LightRAG ``SystemExit``: checked first, reported as a
  ``ConfigurationError``.
* Importing ``nano_vectordb`` runs ``logging.basicConfig(level=INFO)``: the root logger's level
  and handlers are restored after the import. LightRAG's own logger gets no private handler and
  propagates, so the application's logging configuration applies to it.
* ``tiktoken`` downloads its encoding: a local ``RegexTokenizer`` is passed instead.
* ``file_path`` is cut to its basename and used for de-duplication: we pass the (unique) doc id
  as ``file_path`` and refuse ids containing a path separator.
* LightRAG keeps process-global state keyed by workspace only (not by directory) that outlives
  ``finalize_storages``: a second instance, even on another directory, would see the first one's
  documents. So one ``LightRAGIndex`` may be open per process, and closing it resets that state.
  The state is also bound to one event loop: an instance refuses calls from another loop.
* Deleting a document rebuilds shared entities from the LLM cache, so the cache stays enabled.
  The rebuild parses the cached extraction of every chunk that mentions an entity the document
  shared (for an entity like "Hive", most chunks), once per deleted document. Within one
  ``delete``, or the removals of one ``upsert``, each is parsed once
  (``_parse_cached_extraction_once``): replacing 3 Hive pages and deleting a fourth parsed 2,326
  cached extractions in 15 s before, 984 in 7 s after.
* It refuses a document whose text equals another's (content-hash dedup), which would keep a
  page copied into another space out of the index: the hash it dedups on is switched off.
* LightRAG flushes every storage after each document it inserts, and several times per document
  it deletes. File storages rewrite their whole file on each flush, so indexing cost grows with
  the square of the index. Within one ``upsert`` or ``delete`` call the flushes are collected
  (``_flushes_deferred``) and run once per storage at a checkpoint between batches, only when the
  work since the last write took :data:`WRITE_SPACING` times as long as that write (so writing
  stays a bounded share of the time however large the index grows) and the work left is no
  shorter (``_write_due``), and when the call ends; the
  document-status store last: it says which documents are done, so it must never run ahead of
  the data it vouches for. The file vector stores embed what they hold back at every checkpoint,
  not at their write (``_embed_pending``): the work of each batch stays with the batch. The graph
  file is written as strings (``_write_graphml``), not element by element as networkx writes it.
* Extraction is the other large cost. As a batch starts, the chunks of the next batch (cut by
  LightRAG's own chunker with our sizes) are handed to the extractor's ``prefetch``, so an
  extractor with worker processes has them ready when LightRAG asks.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import gc
import hashlib
import itertools
import json
import logging
import os
import pickle
import re
import time
import types
import zlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from core.errors import ConfigurationError, IndexError_, InvalidArgument
from core.files import write_atomically
from core.memory import return_freed_memory
from core.providers.base import Embedder, Extractor
from core.providers.local import LocalEmbedder, RegexTokenizer
from core.settings import LightRAGSettings, Neo4jSettings, PostgresSettings
from core.telemetry import span
from retrievers.base import ChunkHit, GraphHit, IndexDocument, Neighbourhood, Probe, RawResults
from retrievers.lexical import LexicalEntry, LexicalIndex
from retrievers.lightrag_locks import SingleProcessKeyedLocks
from retrievers.lightrag_records import local_llm_func


#: beside the storages: the name of the embedder that built the index
EMBEDDER_MARKER = "wayfinder-embedder.json"
#: beside the storages: the lexical channel's chunks (retrievers.lexical)
LEXICAL_FILE = "wayfinder-lexical.json"
#: beside the storages: which extractor extracted each document
EXTRACTION_FILE = "wayfinder-extraction.json"
#: beside the storages: for each entity and relation on several documents, those that rebuild its vector
HEADS_FILE = "wayfinder-heads.json"
#: what extracted the documents of indexes written before that file existed
LEGACY_EXTRACTOR = "local-1"
#: what built the indexes written before the marker existed (only the offline embedder did)
LEGACY_EMBEDDER = LocalEmbedder.name
#: how many rows a filtered HNSW scan may visit before it settles for fewer than asked
PG_MAX_SCAN_TUPLES = 2_000_000
#: entities read by vector to find one whose name differs from the one asked for only in case
CASE_CANDIDATES = 20
#: above one in this many of a file vector store's rows admitted, a search scores every row
WHOLE_SCAN_SHARE = 8
# Writes wait until the work since the last one has taken this many times as long as that write
# did: a file storage is rewritten whole, and writing after every batch made the cost of a sync
# grow with the square of the index. An interrupted sync redoes at most that much work. (Hive +
# MuSiQue, 2,195 pages, in process: 157.9 s at 4, 145.9 s at 10; the writes' share is 1/(1+this).)
WRITE_SPACING = 10
# Entities and relations are embedded by their names and the head of their description: one
# fragment (one page's words about it), this many characters at most. A merged description grows
# with every page that mentions the item; embedding all of it was two thirds of the index's
# embedding. On the dev sets (`make eval`, whole descriptions → heads): Hive recall@5 0.933 →
# 0.933, MRR 0.851 → 0.818 (one question's best page second); MuSiQue recall@5 0.642 → 0.665,
# all-hops 0.36 → 0.42.
# What the storages keep is the whole description.
DESCRIPTION_HEAD = 150
# Texts in one call to the embedder (LightRAG's ``embedding_batch_num``). A call costs the offline
# embedder ~2 ms of its own besides its texts (and a round trip to a worker), and most of what an
# index embeds is short (entity and relation heads, ~40 tokens): the Hive space in process, 32 a
# call -> 512, 54.6 -> 50.3 s (the workers' embedding 61 -> 57 CPU-s); 256 and 1,024 index as
# fast as 512. The same vectors, to rounding: each text is computed alone.
EMBED_BATCH = 512
#: the vectors of this many entity and relation heads are kept while indexing (2 KiB each)
HEAD_VECTORS = 32_768
#: the texts LightRAG's parse of extraction records normalises, the last this many kept
NORMALISED_KEPT = 8_192
#: the extractions of this many chunks are kept while indexing, for what rebuilds each vector
EXTRACTIONS_KEPT = 20_000
#: LightRAG's storages per profile: (key-value, vectors, graph, document status)
FILE_STORAGES = ("JsonKVStorage", "NanoVectorDBStorage", "NetworkXStorage", "JsonDocStatusStorage")
ENGINE_STORAGES = ("PGKVStorage", "PGVectorStorage", "Neo4JStorage", "PGDocStatusStorage")


@dataclass(frozen=True)
class Engines:
    """The servers of the ``production`` storage profile."""

    postgres: PostgresSettings
    neo4j: Neo4jSettings

    def environment(self, workspace: str) -> dict[str, str]:
        """What LightRAG's PostgreSQL and Neo4j storages read from the environment (they take no
        arguments): every value they use is set, so nothing from the environment or a
        ``config.ini`` in the working directory reaches them."""
        pg, neo = self.postgres, self.neo4j
        return {
            "POSTGRES_HOST": pg.host,
            "POSTGRES_PORT": str(pg.port),
            "POSTGRES_USER": pg.user,
            "POSTGRES_PASSWORD": pg.password.get_secret_value(),
            "POSTGRES_DATABASE": pg.database,
            "POSTGRES_WORKSPACE": workspace,
            "POSTGRES_MAX_CONNECTIONS": str(pg.max_connections),
            "POSTGRES_VECTOR_INDEX_TYPE": "HNSW",
            "NEO4J_URI": neo.uri,
            "NEO4J_USERNAME": neo.user,
            "NEO4J_PASSWORD": neo.password.get_secret_value(),
            "NEO4J_DATABASE": neo.database,
            # The graph's nodes carry this label, beside the navigator's Space/Page/Image nodes.
            "NEO4J_WORKSPACE": f"lightrag_{workspace}",
        }


def _not_about_pypinyin(record: logging.LogRecord) -> bool:
    return "pypinyin" not in record.getMessage()


@contextlib.contextmanager
def _contained_import() -> Iterator[None]:
    """Import LightRAG without reading ``.env`` and without changing the root logger."""
    import dotenv

    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    real_load_dotenv = dotenv.load_dotenv
    dotenv.load_dotenv = lambda *args, **kwargs: False  # type: ignore[assignment]
    lightrag_logger = logging.getLogger("lightrag")
    lightrag_logger.addFilter(_not_about_pypinyin)  # kept out on purpose (core.memory)
    try:
        yield
    finally:
        lightrag_logger.removeFilter(_not_about_pypinyin)
        dotenv.load_dotenv = real_load_dotenv
        root.setLevel(level)
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)


with _contained_import():
    import lightrag.kg.json_doc_status_impl  # noqa: F401  (imported now, under the guard)
    from lightrag.kg.json_kv_impl import JsonKVStorage
    from lightrag.kg.nano_vector_db_impl import NanoVectorDBStorage
    from lightrag.kg.networkx_impl import NetworkXStorage
    import lightrag.lightrag as _lightrag_main
    import lightrag.operate as _lightrag_operate
    import lightrag.pipeline as _lightrag_pipeline
    from lightrag import LightRAG, QueryParam
    from lightrag.base import DocStatus, DocStatusStorage, StorageNameSpace
    from lightrag.constants import GRAPH_FIELD_SEP
    from lightrag.kg.shared_storage import finalize_share_data
    from lightrag.llm_roles import ROLE_NAMES, RoleLLMConfig
    from lightrag.prompt import PROMPTS
    from lightrag.chunker.token_size import chunking_by_token_size
    from lightrag.utils import EmbeddingFunc, Tokenizer, compute_mdhash_id, make_relation_chunk_key, make_relation_vdb_ids
    from lightrag.utils import sanitize_text_for_encoding
    from lightrag.utils import logger as _lightrag_logger
    import lightrag.kg.shared_storage as _lightrag_shared
    import lightrag.kg.nano_vector_db_impl as _lightrag_nano
    import networkx as nx
    from lightrag.file_atomic import atomic_write

# A page copied into another space has the text of the original and permissions of its own; LightRAG
# would refuse it as a duplicate (its content-hash dedup at enqueue). Without a hash there is none.
_lightrag_pipeline.compute_text_content_hash = lambda _content: None

# What the chunks' cached extractions parse to, while a deletion runs (None: not memoised).
_parsed_extractions: contextvars.ContextVar[dict[tuple[Any, ...], tuple[dict, dict]] | None] = contextvars.ContextVar(
    "wayfinder_parsed_extractions", default=None
)
_parse_cached_extraction = _lightrag_operate._rebuild_from_extraction_result
_parse_extraction = _parse_cached_extraction  # for what rebuilds each vector (its own memo, per refresh)


async def _parse_cached_extraction_once(
    text_chunks_storage: Any, extraction_result: str, chunk_id: str, timestamp: int, chunk_data: dict[str, Any] | None = None
) -> tuple[dict, dict]:
    """LightRAG's parse of a chunk's cached extraction, computed once per deletion call. The
    parsed records are only read by the rebuild that receives them (it copies the lists it keeps)."""
    memo = _parsed_extractions.get()
    if memo is None or chunk_data is None:
        return await _parse_cached_extraction(text_chunks_storage, extraction_result, chunk_id, timestamp, chunk_data)
    key = (chunk_id, timestamp, chunk_data.get("file_path"), extraction_result)
    if key not in memo:
        memo[key] = await _parse_cached_extraction(text_chunks_storage, extraction_result, chunk_id, timestamp, chunk_data)
    return memo[key]


_lightrag_operate._rebuild_from_extraction_result = _parse_cached_extraction_once

#: a chunk's own extraction: (kind, entity name or sorted pair) → (description fragments, keywords)
ChunkExtraction = dict[tuple[str, Any], tuple[frozenset[str], frozenset[str]]]
# The extractions of the chunks inserted while an upsert runs, by chunk (None: not recorded).
_extracted_now: contextvars.ContextVar[dict[str, ChunkExtraction] | None] = contextvars.ContextVar("wayfinder_extracted_now", default=None)
_extract_entities = _lightrag_main.extract_entities


async def _extract_entities_noted(*args: Any, **kwargs: Any) -> Any:
    """LightRAG's extraction of a document's chunks, each chunk's result also noted while an upsert
    asks for it (:meth:`LightRAGIndex._refresh_heads` needs them, and need not parse them again)."""
    results = await _extract_entities(*args, **kwargs)
    noted = _extracted_now.get()
    if noted is not None:
        for nodes, edges in results:
            for chunk, extraction in _chunk_extractions(nodes, edges).items():
                noted.setdefault(chunk, {}).update(extraction)
    return results


_lightrag_main.extract_entities = _extract_entities_noted

# LightRAG normalises every name, type and description it parses, with pure functions of the text.
# Names and types recur from chunk to chunk and a relation's description is its sentence, shared by
# the relations it states: each distinct text is normalised once while it is among the last few.
_lightrag_operate.normalize_entity_name = functools.lru_cache(maxsize=NORMALISED_KEPT)(_lightrag_operate.normalize_entity_name)
_lightrag_operate.sanitize_and_normalize_extracted_text = functools.lru_cache(maxsize=NORMALISED_KEPT)(
    _lightrag_operate.sanitize_and_normalize_extracted_text
)

_fix_tuple_delimiter_corruption = _lightrag_operate.fix_tuple_delimiter_corruption


def _fix_delimiters_where_garbled(record: str, delimiter_core: str, tuple_delimiter: str) -> str:
    """LightRAG's repair of a model's garbled record delimiters (thirteen patterns, tried on every
    record it parses), only for a record that may hold one. Each pattern it repairs holds a ``<``,
    ``|`` or ``>`` outside every intact delimiter, or is an intact delimiter, put back as it was:
    a record whose ``<``, ``|`` and ``>`` all stand in intact delimiters comes back as it is."""
    rest = record.replace(tuple_delimiter, "")
    if "<" in rest or "|" in rest or ">" in rest or tuple_delimiter != f"<|{delimiter_core}|>":
        return _fix_tuple_delimiter_corruption(record, delimiter_core, tuple_delimiter)
    return record


_lightrag_operate.fix_tuple_delimiter_corruption = _fix_delimiters_where_garbled

# A file vector store keeps each row's vector a second time, as float16 bytes zlib compresses and
# Base64 encodes for every row upserted since its last write, as it writes. Those bytes hardly
# compress (1,334 characters a row, 1,380 stored as they are) and compressing took ~58 µs a row, a
# second of the Hive index's last write, when nothing else runs: they are stored (zlib's level 0,
# the same format, read back by the same decompress).
_lightrag_nano.zlib = types.SimpleNamespace(compress=functools.partial(zlib.compress, level=0), decompress=zlib.decompress)

# GraphML's value types, as networkx names them (what its reader turns back into these types).
_GRAPHML_TYPES = {str: "string", int: "long", float: "double", bool: "boolean"}
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_GRAPHML_HEAD = (
    "<?xml version='1.0' encoding='utf-8'?>\n"
    '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n'
)


def _xml_text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")


def _xml_attribute(value: str) -> str:
    return '"' + _xml_text(value).replace('"', "&quot;").replace("\n", "&#10;").replace("\t", "&#9;") + '"'


def _write_graphml(graph: Any, path: str) -> None:
    """``nx.write_graphml`` for LightRAG's graph, the document formatted as strings: networkx builds
    an element for every value: 1.4 s against 0.4 for the Hive + MuSiQue graph (20,193 nodes, 23,331
    edges), the largest part of an index run's last write, when nothing else runs. ``nx.read_graphml``
    reads back the same graph. A graph outside what this writes (a directed graph or a
    multigraph, graph attributes or defaults, ids or names that are not strings, a value of
    another type, one name with values of two types) goes to networkx. Text XML cannot hold
    (LightRAG refuses it as it upserts) is refused here, never written."""
    keys: dict[tuple[str, Any], tuple[str, str]] = {}  # (scope, name) → (key id, type)
    known: dict[tuple[str, Any, type], str] = {}  # (scope, name, Python type) → key id

    def declare(scope: str, name: Any, value: Any) -> str | None:
        kind = _GRAPHML_TYPES.get(type(value))
        key_id, first = keys.setdefault((scope, name), (f"d{len(keys)}", kind or ""))
        if not kind or first != kind or not isinstance(name, str):
            return None
        known[(scope, name, type(value))] = key_id
        return key_id

    def element(scope: str, opening: str, data: Mapping[Any, Any]) -> str | None:
        parts = [opening]
        for name, value in data.items():
            if (key_id := known.get((scope, name, type(value))) or declare(scope, name, value)) is None:
                return None
            parts.append(f'<data key="{key_id}">{_xml_text(str(value))}</data>')
        parts.append(f"</{scope}>\n")
        return "".join(parts)

    body: list[str | None] = [None]
    if not graph.is_directed() and not graph.is_multigraph() and not any(graph.graph.values()):
        body = [element("node", f"<node id={_xml_attribute(node)}>", data) if isinstance(node, str) else None for node, data in graph.nodes(data=True)]
        if None not in body:
            body += [element("edge", f"<edge source={_xml_attribute(a)} target={_xml_attribute(b)}>", data) for a, b, data in graph.edges(data=True)]
    if None in body:
        nx.write_graphml(graph, path)
        return
    declared = [
        f'<key id="{key_id}" for="{scope}" attr.name={_xml_attribute(name)} attr.type="{kind}"/>\n' for (scope, name), (key_id, kind) in keys.items()
    ]
    document = "".join([_GRAPHML_HEAD, *declared, '<graph edgedefault="undirected">\n', *body, "</graph>\n</graphml>\n"])  # type: ignore[list-item]
    if found := _NOT_XML.search(document):
        raise ValueError(f"the graph holds a character GraphML cannot: {found[0]!r}")
    with open(path, "w", encoding="utf-8") as file:
        file.write(document)


def _write_nx_graph(graph: Any, file_name: str, workspace: str = "_") -> None:
    """LightRAG's ``NetworkXStorage.write_nx_graph``, through :func:`_write_graphml`."""
    _lightrag_logger.info(f"[{workspace}] Writing graph with {graph.number_of_nodes()} nodes, {graph.number_of_edges()} edges")
    atomic_write(file_name, lambda tmp: _write_graphml(graph, tmp), workspace)


NetworkXStorage.write_nx_graph = staticmethod(_write_nx_graph)  # type: ignore[method-assign]

_merge_source_ids = _lightrag_operate.merge_source_ids


def _merge_plain_source_ids(existing_ids: Iterable[str] | None, new_ids: Iterable[str] | None) -> list[str]:
    """LightRAG's ``merge_source_ids`` (the chunk ids of an entity or relation, old then new, each
    once, stripped), without its regular expression per id: an entity met in many chunks has all
    its ids merged again at each merge. An id joined from several, or not a string, takes
    LightRAG's own path for the whole merge."""
    sequences = [list(ids) if ids else [] for ids in (existing_ids, new_ids)]
    merged: list[str] = []
    seen: set[str] = set()
    for source_id in itertools.chain.from_iterable(sequences):
        if not source_id:
            continue
        if not isinstance(source_id, str) or GRAPH_FIELD_SEP in source_id:
            return _merge_source_ids(*sequences)
        source_id = source_id.strip()
        if source_id and source_id not in seen:
            seen.add(source_id)
            merged.append(source_id)
    return merged


_lightrag_operate.merge_source_ids = _merge_plain_source_ids

for _handler in list(_lightrag_logger.handlers):
    _lightrag_logger.removeHandler(_handler)
_lightrag_logger.propagate = True
_lightrag_logger.setLevel(logging.NOTSET)


UNTRACEABLE = "untraceable"  # stands for a document a chunk no longer leads to
EMBEDS = "__embeds__"  # a packed row's digest of what its vector embeds, for its text (_pack_for_queries)
#: file storages a query-only index never reads: the extraction cache (the largest file of an index
#: after the vectors: 65 MB for the demo's), and the documents' full text
NOT_FOR_QUERIES = ("llm_response_cache", "full_docs")


class _NotLoaded:
    """Stands in for a storage a query-only index does not load: any use is an error, never a
    silent empty answer."""

    def __init__(self, name: str) -> None:
        self._name = name

    async def initialize(self) -> None:
        pass

    async def finalize(self) -> None:
        pass

    def __getattr__(self, attribute: str) -> Any:
        raise IndexError_(f"the index is open for queries only: its {self._name} is not loaded ({attribute})")


class LightRAGIndex:
    """``SemanticIndex`` on LightRAG: file storages under ``working_dir``, or the server engines
    of the ``production`` profile (``engines``)."""

    _open: ClassVar[list[LightRAGIndex]] = []  # LightRAG's shared state is process-global

    def __init__(
        self,
        settings: LightRAGSettings,
        working_dir: Path,
        embedder: Embedder,
        extractor: Extractor,
        *,
        engines: Engines | None = None,
        queries_only: bool = False,
    ) -> None:
        """``queries_only``: the index answers queries and refuses changes, and leaves unloaded the
        file storages only changes read (:data:`NOT_FOR_QUERIES`): the MCP server's index."""
        if (engines is None) != (settings.storage == "files"):
            raise ConfigurationError(f"the {settings.storage!r} storage profile needs {'its servers' if engines is None else 'no servers'}")
        self._settings = settings
        self._engines = engines
        self._queries_only = queries_only
        self._working_dir = working_dir
        self._embedder = embedder
        self._extractor = extractor
        self._rag: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lexical = LexicalIndex()
        self._extracted_by: dict[str, str] = {}  # document → the extractor that extracted it
        self._row_docs: dict[str, _RowDocuments] = {}  # vector store namespace → its rows' documents
        # vector row id → (digest of what its vector embeds, the documents that rebuild it): HEADS_FILE
        self._heads: dict[str, tuple[str, frozenset[str]]] = {}
        self._touched: tuple[set[str], set[tuple[str, str]]] = (set(), set())  # items whose heads are due

    # -- lifetime -------------------------------------------------------------------------------

    def _build(self) -> Any:
        if os.environ.get("ENTITY_TYPES") is not None:
            raise ConfigurationError(
                "ENTITY_TYPES is set in the environment; LightRAG 1.5.7 exits when it sees it. Unset it."
            )
        # Plain closures, not bound methods or partials: LightRAG deep-copies its configuration,
        # and providers hold locks and models that must be shared, not copied.
        extractor, embedder = self._extractor, self._embedder

        async def llm(prompt: str, system_prompt: str | None = None, history_messages: Any = None, **kw: Any) -> str:
            return await local_llm_func(
                prompt,
                system_prompt,
                history_messages,
                extractor=extractor,
                tuple_delimiter=PROMPTS["DEFAULT_TUPLE_DELIMITER"],
                completion_delimiter=PROMPTS["DEFAULT_COMPLETION_DELIMITER"],
                **kw,
            )

        async def embed(texts: list[str], context: str = "document", **_kw: Any) -> Any:
            return await embedder.embed(list(texts), query=context == "query")

        modest = RoleLLMConfig(max_async=2, timeout=600)  # 2 cores; explicit so env vars cannot raise it
        kv, vectors, graph, status = FILE_STORAGES if self._engines is None else ENGINE_STORAGES
        if self._engines is not None:
            with _contained_import():  # they read .env when imported, like the rest of LightRAG
                import lightrag.kg.neo4j_impl  # noqa: F401
                import lightrag.kg.postgres_impl  # noqa: F401
        return LightRAG(
            working_dir=str(self._working_dir),
            workspace=self._settings.workspace,
            kv_storage=kv,
            vector_storage=vectors,
            graph_storage=graph,
            doc_status_storage=status,
            chunk_token_size=self._settings.chunk_token_size,
            chunk_overlap_token_size=self._settings.chunk_overlap_token_size,
            tokenizer=Tokenizer(model_name="wayfinder-regex", tokenizer=RegexTokenizer()),
            # model_name: server engines keep the vectors of each embedder in tables of their own
            embedding_func=EmbeddingFunc(embedding_dim=embedder.dim, func=embed, model_name=embedder.name),
            embedding_batch_num=EMBED_BATCH,
            embedding_func_max_async=2,  # the offline embedder runs two passes at once (LocalEmbedder.streams)
            default_embedding_timeout=600,
            llm_model_func=llm,
            # LightRAG's extraction cache is partitioned by this name: another extractor misses it
            llm_model_name=f"wayfinder-extractor:{extractor.name}",
            llm_model_max_async=2,
            default_llm_timeout=600,
            role_llm_configs={role: modest for role in ROLE_NAMES},
            entity_extract_max_gleaning=0,
            entity_extraction_use_json=False,
            enable_llm_cache=True,
            enable_llm_cache_for_entity_extract=True,
            max_parallel_insert=2,
            rerank_model_func=None,
            vlm_process_enable=False,
            cosine_better_than_threshold=0.2,
        )

    async def __aenter__(self) -> LightRAGIndex:
        if self._open:
            raise ConfigurationError("a LightRAG index is already open in this process; close it first")
        self._working_dir.mkdir(parents=True, exist_ok=True)
        self._refuse_another_embedder(self._marked_embedder())  # before the storages load vectors of another size
        try:
            with self._engine_environment():
                self._rag = self._build()
                _use_single_process_locks()
                _embed_description_heads(self._rag)
                if self._queries_only and self._engines is None:
                    for name in NOT_FOR_QUERIES:
                        setattr(self._rag, name, _NotLoaded(name))
                    _pack_for_queries(self._rag)
                await self._rag.initialize_storages()
        except (ConfigurationError, InvalidArgument):
            raise
        except Exception as exc:
            if self._rag is not None:
                with contextlib.suppress(Exception):
                    await self._rag.finalize_storages()  # connection pools opened before the failure
            self._rag = None
            finalize_share_data()
            raise IndexError_(f"could not open the LightRAG index {self._where}: {exc}") from exc
        self._mark_embedder()
        self._loop = asyncio.get_running_loop()
        self._open.append(self)
        try:
            await self._open_sidecars()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        if self._queries_only:
            return_freed_memory()  # what loading parsed and let go (a server keeps running)
        return self

    async def _open_sidecars(self) -> None:
        """Which extractor extracted each document (documents of an index from before that was
        recorded count as :data:`LEGACY_EXTRACTOR`'s), and the lexical channel's chunks, rebuilt
        from the stores when they do not cover exactly the documents the index holds (an index
        from before the channel, or a run stopped midway)."""
        held = await self.indexed_doc_ids()
        try:
            recorded = json.loads(self._extraction_path.read_text())["extracted_by"]
        except (OSError, ValueError, KeyError):
            recorded = {}
        self._extracted_by = {doc: recorded.get(doc, LEGACY_EXTRACTOR) for doc in held}
        lexical = LexicalIndex.load(self._lexical_path)
        if lexical is None or lexical.doc_ids != held:
            logging.getLogger("wayfinder.index").info("building the lexical channel for %d documents", len(held))
            lexical = LexicalIndex(await self._lexical_entries(sorted(held)))
            lexical.save(self._lexical_path)
        self._lexical = lexical
        try:
            raw = json.loads(self._heads_path.read_text())["heads"]
            self._heads = {row: (digest, frozenset(docs)) for row, (digest, *docs) in raw.items()}
        except (OSError, ValueError, KeyError, TypeError):
            # An index from before the file: found from the extraction cache, which only an index
            # open for changes holds (until then, an item ranks only for callers who see all of it).
            self._heads = {}
            if held and not self._queries_only:
                graph = self._rag.chunk_entity_relation_graph
                names = await graph.get_all_labels()
                pairs = [(edge["source"], edge["target"]) for edge in await graph.get_all_edges()]
                logging.getLogger("wayfinder.index").info("finding what rebuilds %d entities and %d relations", len(names), len(pairs))
                await self._refresh_heads(names, pairs)
                self._save_heads()

    @property
    def _lexical_path(self) -> Path:
        return self._marker.parent / LEXICAL_FILE

    @property
    def _extraction_path(self) -> Path:
        return self._marker.parent / EXTRACTION_FILE

    @property
    def _heads_path(self) -> Path:
        return self._marker.parent / HEADS_FILE

    def _save_sidecars(self) -> None:
        """What Wayfinder keeps beside LightRAG's storages, written with them."""
        self._lexical.save(self._lexical_path)
        write_atomically(self._extraction_path, json.dumps({"extracted_by": self._extracted_by}, sort_keys=True))

    def _save_heads(self) -> None:
        heads = {row: [digest, *sorted(docs)] for row, (digest, docs) in sorted(self._heads.items())}
        write_atomically(self._heads_path, json.dumps({"heads": heads}))

    async def _lexical_entries(self, doc_ids: Sequence[str], titles: dict[str, str] | None = None) -> dict[str, LexicalEntry]:
        """The chunks of these (processed) documents, each preceded by its page's title: from
        ``titles`` or else the first line of the document."""
        rag = self._rag
        statuses = await rag.doc_status.get_by_ids(list(doc_ids)) if doc_ids else []
        chunk_doc = {
            cid: (doc_id, (titles or {}).get(doc_id) or _title(status.get("content_summary") or ""))
            for doc_id, status in zip(doc_ids, statuses, strict=True)
            if status
            for cid in status.get("chunks_list") or []
        }
        rows = await rag.text_chunks.get_by_ids(list(chunk_doc)) if chunk_doc else []
        return {
            cid: LexicalEntry(doc_id, f"{title}\n{row.get('content', '')}")
            for (cid, (doc_id, title)), row in zip(chunk_doc.items(), rows, strict=True)
            if row
        }

    @property
    def _where(self) -> str:
        if self._engines is None:
            return f"in {self._working_dir}"
        pg, neo = self._engines.postgres, self._engines.neo4j
        return f"{self._settings.workspace!r} (PostgreSQL {pg.host}:{pg.port}/{pg.database}, Neo4j {neo.uri})"

    @contextlib.contextmanager
    def _engine_environment(self) -> Iterator[None]:
        """The engines' settings in the environment while LightRAG builds and opens its storages."""
        values = {} if self._engines is None else self._engines.environment(self._settings.workspace)
        saved = {key: os.environ.get(key) for key in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    # An index answers only to the embedder that built it: vectors of two models (or of one model
    # at two sizes) are not comparable, and a query against the wrong ones returns confident
    # nonsense. The embedder's name is written beside the storages when the index is created.

    @property
    def _marker(self) -> Path:
        workspace = self._working_dir / self._settings.workspace if self._settings.workspace else self._working_dir
        return workspace / EMBEDDER_MARKER

    def _marked_embedder(self) -> str | None:
        if self._marker.exists():
            return json.loads(self._marker.read_text())["embedder"]
        statuses = self._marker.parent / "kv_store_doc_status.json"
        if statuses.exists() and statuses.stat().st_size > len("{}"):
            return LEGACY_EMBEDDER  # an index from before the marker: only the offline embedder built those
        return None

    def _refuse_another_embedder(self, built_with: str | None) -> None:
        if built_with is not None and built_with != self._embedder.name:
            raise ConfigurationError(
                f"the index in {self._marker.parent} was built with the embedder {built_with!r}, and the configured one "
                f"is {self._embedder.name!r}: their vectors cannot be compared. Set WAYFINDER_PROVIDERS (and the Gemini "
                f"embedding settings) back to what built the index, or delete {self._working_dir} and run "
                "`wayfinder sync` to rebuild it with the new embedder."
            )

    def _mark_embedder(self) -> None:
        if not self._marker.exists():
            self._marker.parent.mkdir(parents=True, exist_ok=True)
            self._marker.write_text(json.dumps({"embedder": self._embedder.name, "dim": self._embedder.dim}) + "\n")

    async def __aexit__(self, *exc_info: object) -> None:
        if self._rag is None:
            return
        try:
            await self._rag.finalize_storages()
        finally:
            await asyncio.to_thread(self._extractor.close)
            if (close_embedder := getattr(self._embedder, "close", None)) is not None:  # one with workers
                await asyncio.to_thread(close_embedder)
            self._open.remove(self)
            finalize_share_data()  # forget this workspace's in-memory state
            self._rag = None
            self._loop = None
            self._lexical = LexicalIndex()
            self._row_docs.clear()
            self._heads = {}
            self._touched = (set(), set())

    def _require_writable(self) -> Any:
        if self._queries_only:
            raise ConfigurationError(f"the index {self._where} is open for queries only")
        return self._require_open()

    def _require_open(self) -> Any:
        if self._rag is None:
            raise ConfigurationError("LightRAGIndex used outside `async with`")
        if asyncio.get_running_loop() is not self._loop:
            raise ConfigurationError("LightRAGIndex used from another event loop than the one that opened it")
        return self._rag

    # -- writes ---------------------------------------------------------------------------------

    async def upsert(
        self, docs: Sequence[IndexDocument], on_progress: Callable[[int], None] | None = None, *, remove: Sequence[str] = ()
    ) -> None:
        rag = self._require_writable()
        for doc in docs:
            if not doc.doc_id or "/" in doc.doc_id or "\\" in doc.doc_id:
                raise InvalidArgument(f"document id {doc.doc_id!r} must be non-empty without path separators")
        if len({doc.doc_id for doc in docs}) != len(docs):
            raise InvalidArgument("duplicate document ids in one upsert")
        if set(remove) & {doc.doc_id for doc in docs}:
            raise InvalidArgument("a document cannot be indexed and removed in one upsert")
        size = self._settings.insert_batch_size
        slices = _slices(docs, size)
        batches = [[doc for doc in part if not await self._unchanged(doc)] for part in slices]
        removals = list(remove)
        noted = _extracted_now.set({})
        try:
            await self._upsert(rag, docs, slices, batches, removals, on_progress)
        finally:
            _extracted_now.reset(noted)

    async def _upsert(
        self,
        rag: Any,
        docs: Sequence[IndexDocument],
        slices: list[Sequence[IndexDocument]],
        batches: list[list[IndexDocument]],
        removals: list[str],
        on_progress: Callable[[int], None] | None,
    ) -> None:
        done = 0
        started = time.monotonic()
        async with self._flushes_deferred() as checkpoint:
            await self._prefetch(batches[:1])
            for number, (part, batch) in enumerate(zip(slices, batches, strict=True)):
                # The next batch is extracted while this one's vectors are computed and written.
                await self._prefetch(batches[number + 1 : number + 2])
                if batch:
                    ids = [doc.doc_id for doc in batch]
                    await self._delete([*removals, *ids])
                    removals = []
                    try:
                        await rag.ainsert([doc.text for doc in batch], ids=ids, file_paths=ids)
                    except Exception as exc:
                        raise IndexError_(f"LightRAG insert failed: {exc}") from exc
                    titles = {doc.doc_id: _title(doc.text) for doc in batch}
                    self._lexical.replace([], await self._lexical_entries(ids, titles))
                    await self._touch(ids)
                    self._extracted_by.update((doc_id, self._extractor.name) for doc_id in ids)
                    await self._raise_on_failures(ids)
                    left = len(batches) - number - 1
                    await checkpoint(left * (time.monotonic() - started) / (number + 1))
                # Reported once its vectors are computed: as this batch went in, the last one's were.
                if on_progress is not None and 0 < done < len(docs):
                    on_progress(done)
                done += len(part)
            if removals:  # nothing was indexed to carry them
                await self._delete(removals)
        if on_progress is not None and docs:
            on_progress(done)  # the last report waits for the last write

    async def _prefetch(self, batches: Sequence[Sequence[IndexDocument]]) -> None:
        """Tell the extractor which chunk texts LightRAG is about to ask about: chunked as it will,
        from the text as it cleans it on insert, and each chunk as its prompt cleans it again (an
        HTML entity resolved in the text shifts where the chunks end)."""
        settings = self._settings

        def chunk_texts() -> list[str]:
            tokenizer = self._rag.tokenizer
            return [
                sanitize_text_for_encoding(chunk["content"])
                for batch in batches
                for doc in batch
                for chunk in chunking_by_token_size(
                    tokenizer, sanitize_text_for_encoding(doc.text), None, False, settings.chunk_overlap_token_size, settings.chunk_token_size
                )
            ]

        try:
            texts = await asyncio.to_thread(chunk_texts)
            if texts:
                await asyncio.to_thread(self._extractor.prefetch, texts)
        except Exception:  # a hint to work ahead: LightRAG asks for every text anyway
            logging.getLogger("wayfinder.index").warning("working ahead on the next batch failed", exc_info=True)

    async def _unchanged(self, doc: IndexDocument) -> bool:
        if self._extracted_by.get(doc.doc_id) != self._extractor.name:
            return False
        status = await self._rag.doc_status.get_by_id(doc.doc_id)
        if not status or status.get("status") != DocStatus.PROCESSED:
            return False
        stored = await self._rag.full_docs.get_by_id(doc.doc_id)
        # LightRAG keeps the text as it cleans it on insert (stripped, HTML entities resolved).
        return bool(stored) and stored.get("content") == sanitize_text_for_encoding(doc.text)

    async def _raise_on_failures(self, doc_ids: list[str]) -> None:
        for doc_id in doc_ids:
            status = await self._rag.doc_status.get_by_id(doc_id)
            if not status or status.get("status") != DocStatus.PROCESSED:
                state = status.get("status") if status else "missing"
                error = status.get("error_msg") if status else None
                raise IndexError_(f"LightRAG did not process {doc_id}: {state} {error or ''}".strip())

    async def delete(self, doc_ids: Sequence[str]) -> None:
        self._require_writable()
        async with self._flushes_deferred():
            await self._delete(doc_ids)

    async def _delete(self, doc_ids: Sequence[str]) -> None:
        rag = self._rag
        self._lexical.replace(doc_ids, {})
        for doc_id in doc_ids:
            self._extracted_by.pop(doc_id, None)
        parsed_once = _parsed_extractions.set({})
        try:
            for doc_id in doc_ids:
                if not await rag.doc_status.get_by_id(doc_id):
                    continue  # LightRAG would log a warning for an unknown id
                await self._touch([doc_id])  # what it shared is rebuilt from the rest
                try:
                    result = await rag.adelete_by_doc_id(doc_id, delete_llm_cache=False)
                except Exception as exc:
                    raise IndexError_(f"LightRAG delete of {doc_id} failed: {exc}") from exc
                if result.status not in ("success", "not_found"):
                    raise IndexError_(f"LightRAG delete of {doc_id} failed: {result.status} {result.message}")
        finally:
            _parsed_extractions.reset(parsed_once)

    async def _touch(self, doc_ids: Sequence[str]) -> None:
        """Note the entities and relations of these documents (LightRAG's recovery lists of them):
        the documents that rebuild them are found again at the next write."""
        rag = self._rag
        entities, relations = self._touched
        for row in await rag.full_entities.get_by_ids(list(doc_ids)):
            entities.update((row or {}).get("entity_names") or [])
        for row in await rag.full_relations.get_by_ids(list(doc_ids)):
            relations.update(tuple(sorted(pair)) for pair in (row or {}).get("relation_pairs") or [] if len(pair) == 2)

    async def _refresh_heads(self, entities: Collection[str], relations: Collection[tuple[str, str]]) -> None:
        """Find, for each of these entities and relations that stands on several documents, the
        documents whose own extraction of it yields all that its vector embeds (:func:`_headed`:
        the name, the head fragment of the description, a relation's keywords). Any one of them
        rebuilds that vector from its own text (DESIGN.md A4), so a caller who may see one may rank
        with the item (:meth:`GraphHit.rebuilt_from`). Read from the extraction cache: nothing is
        extracted or embedded again. An item whose head no single document yields (a description
        cut short, a summary) gets none: it ranks only for callers who may see all of it."""
        rag = self._rag
        items = [("entity", name, _entity_vdb_id({"entity_name": name}), name) for name in sorted(entities)]
        pairs = sorted({(min(pair), max(pair)) for pair in relations})  # an edge either way round
        items += [("relation", pair, make_relation_vdb_ids(*pair)[0], make_relation_chunk_key(*pair)) for pair in pairs]
        for _, _, row_id, _ in items:
            self._heads.pop(row_id, None)
        if not items:
            return
        try:
            with span("index.heads", items=len(items)):
                vectors = {"entity": rag.entities_vdb, "relation": rag.relationships_vdb}
                tracking = {"entity": rag.entity_chunks, "relation": rag.relation_chunks}
                found: list[tuple[str, Any, str, dict[str, Any], list[str]]] = []
                for kind in ("entity", "relation"):
                    mine = [item for item in items if item[0] == kind]
                    rows = await _vector_rows(vectors[kind], [row_id for _, _, row_id, _ in mine]) if mine else []
                    chunks = await self._tracked_chunks(tracking[kind], [key for _, _, _, key in mine])
                    found += [(kind, item, row_id, row, cids) for (_, item, row_id, _), row, cids in zip(mine, rows, chunks, strict=True) if row]
                doc_of = self._doc_of_chunks(sorted({c for *_, cids in found for c in cids}))
                several = [f for f in found if len({doc_of.get(c) for c in f[4]}) > 1]
                extracted = await self._extractions_of(sorted({c for *_, cids in several for c in cids}))
                for kind, item, row_id, row, cids in several:
                    lines = 1 if kind == "entity" else 2
                    content = str(row.get("content") or "")
                    head = _head(content.split("\n", lines)[lines]) if content.count("\n") >= lines else ""
                    keywords = _keywords(content.split("\t", 1)[0]) if kind == "relation" else frozenset()
                    own = {c: extracted[c].get((kind, item)) for c in cids if c in extracted}
                    fragments = {f for fragment_set, _ in filter(None, own.values()) for f in fragment_set}
                    if not head or head != min(fragments, default=None):
                        continue  # what the vector holds is no one document's fragment
                    rebuilders = frozenset(
                        doc_of[c] for c, mine in own.items() if mine and head in mine[0] and mine[1] == keywords and c in doc_of
                    )
                    if rebuilders:
                        self._heads[row_id] = (_embedded(row, lines), rebuilders)
        except Exception:
            logging.getLogger("wayfinder.index").warning("could not find what rebuilds %d items; they rank for callers who see all of them", len(items), exc_info=True)

    async def _extractions_of(self, chunk_ids: Sequence[str]) -> dict[str, ChunkExtraction]:
        """Each chunk's own extraction: as noted while this upsert extracted it or parsed it
        before, else parsed from the extraction cache (and noted, while an upsert runs: an item on
        many chunks, such as the space's product, is refreshed at every write)."""
        kept = _extracted_now.get()
        noted = kept if kept is not None else {}
        extracted = {chunk: noted[chunk] for chunk in chunk_ids if chunk in noted}
        rest = [chunk for chunk in chunk_ids if chunk not in noted]
        rag = self._rag
        rows = await _rows(rag.text_chunks, rest) if rest else []
        cache_ids = sorted({key for row in rows if row for key in row.get("llm_cache_list") or []})
        entries = dict(zip(cache_ids, await rag.llm_response_cache.get_by_ids(cache_ids) if cache_ids else [], strict=True))
        parsed: dict[str, ChunkExtraction] = {}  # identical chunks share a cache entry
        for chunk, row in zip(rest, rows, strict=True):
            mine: ChunkExtraction = {}
            for key in (row or {}).get("llm_cache_list") or []:
                entry = entries.get(key)
                if not entry or entry.get("cache_type") != "extract":
                    continue
                if entry["return"] not in parsed:
                    nodes, edges = await _parse_extraction(rag.text_chunks, entry["return"], chunk, 0, {})
                    parsed[entry["return"]] = _chunk_extractions(nodes, edges).get(chunk, {})
                for item, (fragments, keywords) in parsed[entry["return"]].items():
                    known = mine.get(item, (frozenset(), frozenset()))
                    mine[item] = (known[0] | fragments, known[1] | keywords)
            extracted[chunk] = mine
            if row:  # a chunk's id is its text's digest: what it extracts to stays
                noted[chunk] = mine
        while len(noted) > EXTRACTIONS_KEPT:
            del noted[next(iter(noted))]  # the first noted
        return extracted

    @contextlib.asynccontextmanager
    async def _flushes_deferred(self) -> AsyncIterator[Callable[[float], Awaitable[None]]]:
        """Collect the storages LightRAG asks to flush, and flush each once: when the checkpoint
        this yields finds it due (:func:`_write_due`, told the seconds of work the call expects
        still to do), and on the way out (also when the call
        failed: what LightRAG finished before the failure is kept, as it would have been)."""
        storages = [s for s in vars(self._rag).values() if isinstance(s, StorageNameSpace)]
        pending: dict[int, StorageNameSpace] = {}
        last = {"written": time.monotonic(), "took": 0.0}

        def deferred(storage: StorageNameSpace) -> Callable[[], Any]:
            async def note() -> None:
                pending[id(storage)] = storage

            return note

        async def flush() -> None:
            started = time.monotonic()
            status = [s for s in pending.values() if isinstance(s, DocStatusStorage)]
            data = [s for s in pending.values() if not isinstance(s, DocStatusStorage)]
            if pending:
                await asyncio.to_thread(self._save_sidecars)
            pending.clear()
            for group in (data, status):  # the status only once all the data it vouches for is written
                # the class's own method: the instance's is the note above until the call ends
                results = await asyncio.gather(*(type(s).index_done_callback(s) for s in group), return_exceptions=True)
                self._row_docs.clear()  # the file vector stores apply their rows when flushed
                if failed := _first_failure(results):
                    raise IndexError_(f"LightRAG could not write its storages: {failed}") from failed
                if group is data and any(self._touched):
                    # From the rows just written. Each entry names what its row embeds, so one
                    # older or newer than the rows (a write cut short) is never trusted.
                    entities, relations = self._touched
                    self._touched = (set(), set())
                    await self._refresh_heads(entities, relations)
                    await asyncio.to_thread(self._save_heads)
            last.update(written=time.monotonic(), took=time.monotonic() - started)

        embedding: list[asyncio.Task[None]] = []  # the last batch's vectors, while the next one is inserted

        async def embedded() -> None:
            while embedding:
                await embedding.pop()

        async def checkpoint(left_s: float) -> None:
            await embedded()
            if pending and _write_due(time.monotonic() - last["written"], last["took"], left_s):
                await flush()  # embeds what it writes
            else:
                embedding.append(asyncio.create_task(self._embed_pending()))

        for storage in storages:
            storage.index_done_callback = deferred(storage)  # type: ignore[method-assign]
        try:
            yield checkpoint
        finally:
            # What failed to embed stays held back: the write embeds it, or says why it cannot.
            await asyncio.gather(*embedding, return_exceptions=True)
            for storage in storages:
                del storage.index_done_callback  # the class's own method again
            await flush()

    async def _embed_pending(self) -> None:
        """Embed the rows the file vector stores hold back for their next write, each vector kept
        with its row as a read of the row keeps it (the write embeds none of them again). Held back
        to the write, each write embedded all the work since the last one, and the last took 19 s
        of the last tenth's 24 s in the Hive + MuSiQue run (its first tenth indexed 2.8 times as
        fast). A store's lock is held only to list its rows, so the next batch goes in (its records
        merged on this thread) while these are embedded on others; a row upserted again meanwhile
        is a new row, embedded later. An engine store writes what it holds back whenever it
        flushes: only the rows it buffered, so nothing there grows with the index."""
        rag = self._rag
        stores = [s for s in (rag.entities_vdb, rag.relationships_vdb, rag.chunks_vdb) if isinstance(s, NanoVectorDBStorage)]

        async def embed(storage: Any) -> None:  # the rows its write would embed (1.5.7's internals)
            async with storage._storage_lock:
                rows = [row for row in storage._pending_upserts.values() if row.vector is None]
            size = storage._max_batch_size
            batches = [rows[start : start + size] for start in range(0, len(rows), size)]
            vectors = await asyncio.gather(
                *(storage.embedding_func([row.record["content"] for row in batch], context="document") for batch in batches)
            )
            for batch, found in zip(batches, vectors, strict=True):
                if len(found) != len(batch):
                    raise IndexError_(f"the embedder returned {len(found)} vectors for {len(batch)} texts")
                for row, vector in zip(batch, found, strict=True):
                    row.vector = vector

        results = await asyncio.gather(*(embed(s) for s in stores), return_exceptions=True)
        if failed := _first_failure(results):  # what was not embedded stays held back: the write tries again
            raise IndexError_(f"LightRAG could not embed its rows: {failed}") from failed

    # -- reads ----------------------------------------------------------------------------------

    async def outdated_doc_ids(self) -> set[str]:
        self._require_open()
        return {doc for doc, extractor in self._extracted_by.items() if extractor != self._extractor.name}

    async def indexed_doc_ids(self) -> set[str]:
        rag = self._require_open()
        processed = await rag.doc_status.get_docs_by_statuses([DocStatus.PROCESSED])
        return set(processed)

    async def probe(self, text: str) -> Probe:
        self._require_open()
        with span("index.keywords"):
            high, low = await asyncio.to_thread(self._extractor.keywords, text)
        probes = [p for p in (text, ", ".join(low), ", ".join(high)) if p]
        try:
            with span("index.embed", texts=len(probes)):
                vectors = await self._embedder.embed(probes, query=True)
        except (ConfigurationError, InvalidArgument):
            raise
        except Exception as exc:
            raise IndexError_(f"LightRAG query failed: {exc}") from exc
        return Probe(text, tuple(high), tuple(low), dict(zip(probes, vectors, strict=True)))

    async def query(self, text: str | Probe, top_k: int, within: Set[str] | None = None) -> RawResults:
        """Three independent searches: chunks by the query, entities by its low-level keywords
        (named exactly, then by vector), relations by its high-level keywords (LightRAG's
        naive/local/global channels).

        LightRAG's own ``aquery_data`` is not used: it expands entities to their relations and
        relations to their entities before anyone can authorize them, so a hidden page would pick
        visible candidates. Here every hit carries its documents and nothing is expanded.
        """
        rag = self._require_open()
        if top_k < 1:
            raise InvalidArgument("top_k must be at least 1")
        probe = text if isinstance(text, Probe) else await self.probe(text)
        text, high, low, vector_of = probe.text, probe.high, probe.low, probe.vectors
        probes = [text, ", ".join(low), ", ".join(high)]
        try:
            async def nothing() -> list[dict[str, Any]]:
                return []

            # The three channels are independent: with server engines their round trips overlap.
            with span("index.vectors"):
                chunk_rows, entity_rows, relation_rows = await asyncio.gather(
                    self._nearest(rag.chunks_vdb, text, top_k, vector_of[text], lambda row: row["id"], within),
                    self._nearest(rag.entities_vdb, probes[1], top_k, vector_of[probes[1]], _entity_vdb_id, within) if low else nothing(),
                    self._nearest(rag.relationships_vdb, probes[2], top_k, vector_of[probes[2]], _relation_vdb_id, within) if high else nothing(),
                )
            # Entities the query names exactly come first: an identifier (a property, a class, an
            # error code) is the strongest evidence there is, and its vector may not be close.
            graph = rag.chunk_entity_relation_graph
            named = list(await _nodes(graph, list(low))) if low else []
            scored = [(name, 1.0) for name in named] + [
                (row["entity_name"], float(row["distance"])) for row in entity_rows if row["entity_name"] not in named
            ]
            names = [name for name, _ in scored]
            pairs = [(row["src_id"], row["tgt_id"]) for row in relation_rows]
            nodes = await _nodes(graph, names) if names else {}
            edges = await _edges(graph, pairs) if pairs else {}
        except (ConfigurationError, InvalidArgument):
            raise
        except Exception as exc:
            raise IndexError_(f"LightRAG query failed: {exc}") from exc

        entity_sources = await self._tracked_chunks(rag.entity_chunks, names)
        relation_sources = await self._tracked_chunks(rag.relation_chunks, [make_relation_chunk_key(a, b) for a, b in pairs])
        # One lookup of the documents behind every chunk met: the graph's supporting chunks, and the
        # chunk hits whose rows do not say (the PostgreSQL rows carry no document id).
        unplaced = {row["id"] for row in chunk_rows if not row.get("full_doc_id")}
        doc_of = self._doc_of_chunks(sorted(set().union(*entity_sources, *relation_sources, unplaced)))
        chunk_docs = [(row, row.get("full_doc_id") or doc_of.get(row["id"])) for row in chunk_rows]
        chunk_hits = [
            ChunkHit(row["id"], doc_id, row.get("content", ""), rank, float(row["distance"]))
            for rank, (row, doc_id) in enumerate(((r, d) for r, d in chunk_docs if d), start=1)
        ]
        entities = [(name, nodes.get(name) or {}, score) for name, score in scored]
        relations = [
            (f"{a} -> {b}", edges.get((a, b)) or {}, float(row["distance"]))
            for (a, b), row in zip(pairs, relation_rows, strict=True)
        ]
        with span("index.lexical"):
            lexical_rows, weights = await asyncio.to_thread(lambda: (self._lexical.search(text, top_k, within), self._lexical.term_weights(text, within)))
        # The lexical channel holds its chunks' text: no second read of the chunk store.
        lexical = [
            ChunkHit(cid, doc_id, self._lexical.chunk_text(cid), rank, score)
            for rank, (cid, doc_id, score) in enumerate(lexical_rows, start=1)
        ]
        # What rebuilds a hit: any of its documents for an entity the query names (its name is all
        # that ranked it), else those whose own extraction yields what its vector embeds.
        entity_rebuilders = await self._rebuilders(rag.entities_vdb, [_entity_vdb_id({"entity_name": name}) for name in names])
        relation_rebuilders = await self._rebuilders(rag.relationships_vdb, [make_relation_vdb_ids(a, b)[0] for a, b in pairs])
        graph_hits = (
            _graph_hits(
                "entity", entities, entity_sources, doc_of,
                [entity_rebuilders.get(_entity_vdb_id({"entity_name": name}), frozenset()) for name in names], named=set(named),
            ),
            _graph_hits("relation", relations, relation_sources, doc_of, [relation_rebuilders.get(make_relation_vdb_ids(a, b)[0], frozenset()) for a, b in pairs]),
        )
        if within is not None:
            chunk_hits = [hit for hit in chunk_hits if hit.doc_id in within]
            graph_hits = tuple([h for hit in hits if (h := hit if hit.doc_ids <= within else hit.rebuilt_from(within))] for hits in graph_hits)
        return RawResults(chunks=chunk_hits, entities=graph_hits[0], relations=graph_hits[1], lexical=lexical, term_weights=weights)

    async def entities_of(self, doc_ids: Sequence[str]) -> list[GraphHit]:
        rag = self._require_open()
        rows = await _rows(rag.full_entities, list(doc_ids)) if doc_ids else []
        return await self._entities(sorted({name for row in rows if row for name in row.get("entity_names") or []}))

    async def _entities(self, names: list[str]) -> list[GraphHit]:
        """The entities called ``names`` that the graph holds, each with its supporting documents."""
        if not names:
            return []
        rag = self._require_open()
        sources = await self._tracked_chunks(rag.entity_chunks, names)
        doc_of = self._doc_of_chunks(sorted(set().union(*sources)))
        nodes = await _nodes(rag.chunk_entity_relation_graph, names)
        return _graph_hits("entity", [(name, nodes.get(name) or {}, 0.0) for name in names], sources, doc_of)

    async def entity_named(self, name: str, within: Set[str] | None = None) -> GraphHit | None:
        rag = self._require_open()
        exact = await _nodes(rag.chunk_entity_relation_graph, [name])
        # Names differ in case from page to page ("metastore", "Metastore"): the entities whose
        # names are nearest by vector, one of which should be it. They are looked up, and one
        # entity is read, whether or not the name is found as it is, so a name only pages outside
        # ``within`` hold costs what a name found nowhere does (DESIGN.md A6).
        vector = (await self._embedder.embed([name], query=True))[0]
        rows = await self._nearest(rag.entities_vdb, name, CASE_CANDIDATES, vector, _entity_vdb_id, within)
        same = sorted(row["entity_name"] for row in rows if row["entity_name"].casefold() == name.casefold())
        chosen = name if exact else same[0] if same else None
        found = await self._entities([chosen or name])
        hit = found[0] if found and chosen is not None else None
        return hit if hit is not None and (within is None or hit.doc_ids <= within) else None

    async def neighbourhood(self, names: Sequence[str], within: Set[str] | None = None) -> Neighbourhood:
        rag = self._require_open()
        graph = rag.chunk_entity_relation_graph
        touching = await _node_edges(graph, list(dict.fromkeys(names)))
        # An engine may give an edge either way round: each is walked from the entity asked about.
        pairs = list(dict.fromkeys((name, b if a == name else a) for name in touching for a, b in touching[name] if a != b))
        edges = await _edges(graph, pairs) if pairs else {}
        pairs = [pair for pair in pairs if pair in edges]
        sources = await self._tracked_chunks(rag.relation_chunks, [make_relation_chunk_key(a, b) for a, b in pairs])
        doc_of = self._doc_of_chunks(sorted(set().union(*sources)))
        found = [(f"{a} -> {b}", edges[a, b], float(edges[a, b].get("weight") or 0.0)) for a, b in pairs]
        ends = dict(zip((name for name, _, _ in found), pairs, strict=True))
        relations = [dataclasses.replace(hit, ends=ends[hit.name]) for hit in _graph_hits("relation", found, sources, doc_of)]
        entities = {hit.name: hit for hit in await self._entities(sorted({r.ends[1] for r in relations}))}
        relations = [r for r in relations if r.ends[1] in entities]
        if within is not None:
            relations = [r for r in relations if r.doc_ids <= within and entities[r.ends[1]].doc_ids <= within]
            entities = {r.ends[1]: entities[r.ends[1]] for r in relations}
        return Neighbourhood(relations, entities)

    async def _nearest(
        self, storage: Any, text: str, top_k: int, vector: Any, vdb_id: Callable[[dict[str, Any]], str], within: Set[str] | None
    ) -> list[dict[str, Any]]:
        """The ``top_k`` rows nearest ``vector`` (of the documents ``within``, when given), each with
        its cosine similarity as ``distance`` (the name LightRAG's file storage gives it). The
        PostgreSQL storage orders by it but does not return it: there it is computed from the
        stored vectors."""
        if within is not None:
            if isinstance(storage, NanoVectorDBStorage):
                return await self._nearest_within(storage, top_k, vector, within)
            return await self._nearest_within_engine(storage, top_k, vector, within)
        rows = await storage.query(text, top_k, query_embedding=vector)
        if all("distance" in row for row in rows):
            return rows
        ids = [vdb_id(row) for row in rows]
        stored = await storage.get_vectors_by_ids(ids)
        query = np.asarray(vector, dtype=np.float64)
        scored = []
        for row, row_id in zip(rows, ids, strict=True):
            if row_id in stored:
                found = np.asarray(stored[row_id], dtype=np.float64)
                cosine = float(found @ query / ((np.linalg.norm(found) * np.linalg.norm(query)) or 1.0))
                scored.append({**row, "id": row_id, "distance": cosine})
        return scored

    async def _nearest_within(self, storage: Any, top_k: int, vector: Any, within: Set[str]) -> list[dict[str, Any]]:
        """The file storage's search on the rows of the documents ``within`` only: the same cosine
        and threshold as its own query, over a masked matrix."""
        client = await storage.client_storage
        data, matrix = client["data"], client["matrix"]
        rows = await self._row_documents(storage)
        admitted = np.flatnonzero(rows.admitted(within))
        if not len(admitted):
            return []
        query = np.asarray(vector, dtype=matrix.dtype)
        query = query / (np.linalg.norm(query) or 1.0)
        # Copying a row out costs several times scoring it: past an eighth of the rows, every row
        # is scored and the admitted ones picked out after (15,000 rows, nine in ten admitted:
        # 3.7 -> 0.7 ms), below it the admitted rows are copied out first.
        scores = (matrix @ query)[admitted] if len(admitted) * WHOLE_SCAN_SHARE >= rows.count else matrix[admitted] @ query
        k = min(top_k, len(admitted))
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [
            {**{key: value for key, value in data[i].items() if key != "vector" and not key.startswith("__")}, "id": data[i]["__id__"], "distance": float(score)}
            for i, score in zip(admitted[best], scores[best], strict=True)
            if score >= storage.cosine_better_than_threshold
        ]

    async def _row_documents(self, storage: Any) -> _RowDocuments:
        """The documents behind the rows of a file vector store, and what rebuilds each (cached)."""
        data = (await storage.client_storage)["data"]
        rows = self._row_docs.get(storage.namespace)
        if rows is None or rows.data is not data or rows.count != len(data):  # a reload swaps the list
            lines = 1 if storage.namespace.endswith("entities") else 2 if storage.namespace.endswith("relationships") else 0
            rows = self._row_docs[storage.namespace] = _RowDocuments.of(data, self._lexical.doc_of, self._heads if lines else {}, lines)
        return rows

    async def _rebuilders(self, storage: Any, row_ids: Sequence[str]) -> Mapping[str, frozenset[str]]:
        """Row id → the documents that rebuild its vector (:meth:`_refresh_heads`), for those of
        ``row_ids`` whose vector still embeds what they were found for."""
        if isinstance(storage, NanoVectorDBStorage):
            return (await self._row_documents(storage)).rebuilders
        wanted = [row_id for row_id in dict.fromkeys(row_ids) if row_id in self._heads]
        rows = await storage.get_by_ids(wanted) if wanted else []
        lines = 1 if storage.namespace.endswith("entities") else 2
        return {
            row_id: self._heads[row_id][1]
            for row_id, row in zip(wanted, rows, strict=True)
            if row and self._heads[row_id][0] == _embedded(row, lines)
        }

    async def _nearest_within_engine(self, storage: Any, top_k: int, vector: Any, within: Set[str]) -> list[dict[str, Any]]:
        """The PostgreSQL storage's search on the rows of the documents ``within`` only: LightRAG's
        own query with the filter in its WHERE clause, and the HNSW scan told to go on past its
        first candidates until enough rows pass (otherwise it stops at ``hnsw.ef_search`` rows and
        a narrow filter leaves almost none)."""
        if storage.namespace.endswith("chunks"):
            columns, condition, allowed, rebuilt = "id, content, full_doc_id", "full_doc_id = ANY($3::varchar[])", sorted(within), ()
        else:
            entities = storage.namespace.endswith("entities")
            columns = "entity_name" if entities else "source_id AS src_id, target_id AS tgt_id"
            # or rebuilt from one of them (checked against what the row embeds once it is found)
            condition = "((chunk_ids <@ $3::varchar[] AND cardinality(chunk_ids) > 0) OR id = ANY($6::varchar[]))"
            allowed = self._lexical.chunks_of(within)
            prefix = "ent-" if entities else "rel-"
            rebuilt = (sorted(row_id for row_id, (_, docs) in self._heads.items() if row_id.startswith(prefix) and not docs.isdisjoint(within)),)
        if not allowed:
            return []
        sql = (
            f"SELECT {columns}, 1 - (content_vector <=> $2::vector) AS distance FROM {storage.table_name} "
            f"WHERE workspace = $1 AND {condition} AND content_vector <=> $2::vector < $4 "
            f"ORDER BY content_vector <=> $2::vector LIMIT $5"
        )
        params = (storage.workspace, np.asarray(vector, dtype=np.float32), allowed, 1 - storage.cosine_better_than_threshold, top_k, *rebuilt)

        async def search(connection: Any) -> list[Any]:
            async with connection.transaction():
                # Past hnsw.max_scan_tuples (20,000) a scan gives up short of top_k: a narrow filter
                # on a large table may need to look at every row, which is what an exact search costs.
                await connection.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                await connection.execute(f"SET LOCAL hnsw.max_scan_tuples = {PG_MAX_SCAN_TUPLES}")
                return await connection.fetch(sql, *params)

        rows = await storage.db._run_with_retry(search)  # LightRAG's pool, with its retries
        return [{**dict(row), "distance": float(row["distance"])} for row in rows]

    # -- baselines for evaluation runs (never for requests: nothing here is authorized) ----------

    async def plain_lightrag(self, text: str, top_k: int) -> list[str]:
        """LightRAG on its own: ``aquery_data`` in ``mix`` mode with our keywords and no reranker;
        the documents of the chunks it returns, in its order. It expands through the graph before
        anything can be authorized (see :meth:`query`), so the caller authorizes every document
        before scoring it."""
        rag = self._require_open()
        high, low = await asyncio.to_thread(self._extractor.keywords, text)
        param = QueryParam(mode="mix", top_k=top_k, chunk_top_k=top_k, hl_keywords=high or [text], ll_keywords=low or [text], enable_rerank=False)
        try:
            result = await rag.aquery_data(text, param)
        except Exception as exc:
            raise IndexError_(f"LightRAG query failed: {exc}") from exc
        chunks = (result.get("data") or {}).get("chunks") or []
        return list(dict.fromkeys(c["file_path"] for c in chunks if c.get("file_path")))

    async def plain_dense(self, text: str, top_k: int) -> list[str]:
        """The chunk vectors on their own (the embedder's cosine, no keywords, no graph, no fusion):
        documents by their nearest chunk."""
        rag = self._require_open()
        vector = (await self._embedder.embed([text], query=True))[0]
        try:
            rows = await self._nearest(rag.chunks_vdb, text, top_k, vector, lambda row: row["id"], None)
        except Exception as exc:
            raise IndexError_(f"LightRAG query failed: {exc}") from exc
        doc_of = self._doc_of_chunks([row["id"] for row in rows])
        return list(dict.fromkeys(doc for row in rows if (doc := row.get("full_doc_id") or doc_of.get(row["id"]))))

    def plain_bm25(self, text: str, top_k: int) -> list[str]:
        """The lexical channel on its own: documents by their best chunk's BM25 score."""
        self._require_open()
        return list(dict.fromkeys(doc for _, doc, _ in self._lexical.search(text, top_k)))

    async def graph_evidence(self) -> dict[str, frozenset[str]]:
        """Every entity and relation (``"A -> B"``, both ways) with the documents supporting it,
        ``UNTRACEABLE`` among them where a supporting chunk has no document: for evaluation runs,
        not for requests (it reads the whole graph)."""
        rag = self._require_open()
        graph = rag.chunk_entity_relation_graph
        names = await graph.get_all_labels()
        pairs = [(edge["source"], edge["target"]) for edge in await graph.get_all_edges()]
        entity_sources = await self._tracked_chunks(rag.entity_chunks, names)
        relation_sources = await self._tracked_chunks(rag.relation_chunks, [make_relation_chunk_key(a, b) for a, b in pairs])
        doc_of = self._doc_of_chunks(sorted(set().union(*entity_sources, *relation_sources)))

        def documents(chunk_ids: list[str]) -> frozenset[str]:
            return frozenset(doc_of.get(c, UNTRACEABLE) for c in chunk_ids)

        evidence = {name: documents(chunks) for name, chunks in zip(names, entity_sources, strict=True) if chunks}
        for (a, b), chunks in zip(pairs, relation_sources, strict=True):
            if chunks:
                evidence[f"{a} -> {b}"] = evidence[f"{b} -> {a}"] = documents(chunks)
        return evidence

    async def chunks(self, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        rag = self._require_open()
        wanted = list(dict.fromkeys(chunk_ids))
        rows = await _rows(rag.text_chunks, wanted) if wanted else []
        return [
            ChunkHit(cid, row["full_doc_id"], row.get("content", ""), rank=0)
            for cid, row in zip(wanted, rows, strict=True)
            if row and row.get("full_doc_id")
        ]

    @staticmethod
    async def _tracked_chunks(storage: Any, keys: list[str]) -> list[list[str]]:
        rows = await _rows(storage, keys) if keys else []
        return [list((row or {}).get("chunk_ids") or []) for row in rows]

    def _doc_of_chunks(self, chunk_ids: list[str]) -> dict[str, str]:
        """The documents of the chunks, from the map the masks use too (the chunk store would copy
        every chunk's text to say it: 38 ms of a search). A chunk it does not know is untraceable."""
        return {cid: doc for cid in chunk_ids if (doc := self._lexical.doc_of(cid)) is not None}


# Reads for queries. LightRAG's own batch reads take the storage's namespace lock once per key
# (the graph's get_nodes_batch calls get_node, which checks for a reload under the lock, for
# every name) and deep-copy every row under it, so concurrent searches queue behind each other's
# copies: under 50 clients a search waited 5-20 s there. These read the file storages in one step
# without an await in between (so no coroutine of this process changes them meanwhile) and do not
# copy: callers read the rows and never change them. Other storages answer as LightRAG does.


def _write_due(since_s: float, took_s: float, left_s: float) -> bool:
    """Whether to write the storages at a checkpoint: once the work since the last write took
    :data:`WRITE_SPACING` times as long as that write, unless the work left is shorter than that
    too — the call's end writes them anyway, sooner (a write at 2,195 pages takes 2-3 s). An
    interrupted call loses at most twice that much work."""
    due = WRITE_SPACING * took_s
    return since_s >= due and left_s >= due


def _first_failure(results: Iterable[object]) -> BaseException | None:
    """The first exception among ``gather(..., return_exceptions=True)``'s results; a
    cancellation among them is raised at once."""
    failed = [r for r in results if isinstance(r, BaseException)]
    for error in failed:
        if isinstance(error, asyncio.CancelledError):
            raise error
    return failed[0] if failed else None


async def _rows(storage: Any, ids: list[str]) -> list[dict[str, Any] | None]:
    data = getattr(storage, "_data", None) if isinstance(storage, JsonKVStorage) else None
    if isinstance(data, dict):
        return [data.get(key) for key in ids]
    return list(await storage.get_by_ids(ids))


async def _vector_rows(storage: Any, ids: list[str]) -> list[dict[str, Any] | None]:
    """Rows of a vector store by id (the file store's own lookup scans every row for each id)."""
    if not isinstance(storage, NanoVectorDBStorage):
        return list(await storage.get_by_ids(ids))
    by_id = {row["__id__"]: row for row in (await storage.client_storage)["data"]}
    return [by_id.get(row_id) for row_id in ids]


async def _nodes(storage: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    if isinstance(storage, NetworkXStorage):
        graph = await storage._get_graph()  # the reload check, once
        return {name: dict(graph.nodes[name]) for name in names if graph.has_node(name)}
    return dict(await storage.get_nodes_batch(names))


async def _edges(storage: Any, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    if isinstance(storage, NetworkXStorage):
        graph = await storage._get_graph()
        return {(a, b): dict(graph.edges[a, b]) for a, b in pairs if graph.has_edge(a, b)}
    return dict(await storage.get_edges_batch([{"src": a, "tgt": b} for a, b in pairs]))


def _pack_for_queries(rag: Any) -> None:
    """Pack what the file storages loaded into as few pages of memory as it needs, for an index
    that only answers queries (the MCP server's, which keeps it for as long as it runs).

    Parsing the graph's XML and the vector stores' JSON leaves the objects kept scattered among
    the parser's freed ones, and a page that holds one of them is never given back: the Hive
    index held its graph in 148 MiB, 110 of them the parser's leftovers. Serialised, let go, and
    read back once the parser's objects are gone, the same objects lie side by side.

    The rows also drop what only writes read: their copy of the vector as text (the matrix has
    it), their documents' names (``file_path``; ``source_id`` says it), and an entity's or a
    relation's text, kept as the digest of what its vector embeds (:class:`_RowDocuments`)."""
    graph_storage = rag.chunk_entity_relation_graph
    stores = ((rag.entities_vdb, 1), (rag.relationships_vdb, 2), (rag.chunks_vdb, 0))
    tables = [storage._client._NanoVectorDB__storage for storage, _ in stores]  # its rows and matrix
    for table, (_, lines) in zip(tables, stores, strict=True):
        for row in table["data"]:
            row.pop("vector", None)
            row.pop("file_path", None)
            if lines:
                row[EMBEDS] = _embedded(row, lines)
                row.pop("content", None)
    packed = pickle.dumps((graph_storage._graph, [table["data"] for table in tables]), protocol=pickle.HIGHEST_PROTOCOL)
    graph_storage._graph = None
    for table in tables:
        table["data"] = []
    gc.collect()  # a graph refers to itself (its views): only the collector lets it go
    graph, rows = pickle.loads(packed)
    del packed
    graph_storage._graph = graph
    for table, data in zip(tables, rows, strict=True):
        table["data"] = data


def _use_single_process_locks() -> None:
    """LightRAG's keyed locks taken as :class:`SingleProcessKeyedLocks` when its shared data serves
    this process alone (as ``LightRAG()`` sets it up); with workers it keeps its own."""
    table = _lightrag_shared._storage_keyed_lock
    if _lightrag_shared._is_multiprocess is False and not isinstance(table, SingleProcessKeyedLocks):
        _lightrag_shared._storage_keyed_lock = SingleProcessKeyedLocks(table)


def _slices(docs: Sequence[IndexDocument], size: int) -> list[Sequence[IndexDocument]]:
    """``docs`` in batches of ``size``, the first three an eighth, a quarter and a half of it. The
    next batch is extracted while this one is merged and embedded, but the first has none before
    it and its extraction waits on the workers' start: a small first batch starts the pipeline
    sooner (the Hive space in process, side by side: 67.5 -> 65.7 s, 64.2 -> 63.1 s)."""
    slices: list[Sequence[IndexDocument]] = []
    start = 0
    for length in itertools.chain((n for n in (size // 8, size // 4, size // 2) if n > 0), itertools.repeat(size)):
        if start >= len(docs):
            return slices
        slices.append(docs[start : start + length])
        start += length
    return slices


def _embed_description_heads(rag: Any) -> None:
    """The entity and relation vector stores embed :func:`_headed` texts (:data:`DESCRIPTION_HEAD`).

    An item is upserted again by every batch that mentions it, its description merged anew, and
    its vectors are embedded batch by batch (:meth:`LightRAGIndex._embed_pending`); its head rarely
    changes, so the vectors of the last :data:`HEAD_VECTORS` heads embedded are kept and a head
    seen again is not embedded again (the Hive + MuSiQue run, in process: 59,804 texts embedded
    in 151.3 s without them, 51,883 in 145.9 s with them; 51,310 when all was held to the write)."""
    known: OrderedDict[str, np.ndarray] = OrderedDict()
    for storage, lines in ((rag.entities_vdb, 1), (rag.relationships_vdb, 2)):  # "name\n…", "keywords\tsource\ntarget\n…"
        inner = storage.embedding_func  # LightRAG's, with its concurrency limit

        async def func(texts: list[str], *args: Any, inner: Any = inner, lines: int = lines, **kwargs: Any) -> Any:
            heads = [_headed(text, lines) for text in texts]
            mine = {head: known[head] for head in heads if head in known}  # calls run side by side
            new = [head for head in dict.fromkeys(heads) if head not in mine]
            if new:
                mine.update(zip(new, await inner.func(new, *args, **kwargs), strict=True))
            for head, vector in mine.items():
                known[head] = vector
                known.move_to_end(head)
            while len(known) > HEAD_VECTORS:
                known.popitem(last=False)
            return np.stack([mine[head] for head in heads])

        storage.embedding_func = dataclasses.replace(inner, func=func)


_FRAGMENT_SEP = re.compile(f"{re.escape(GRAPH_FIELD_SEP)}|\n")  # merged fragments; a summary's lines


def _headed(text: str, lines: int) -> str:
    """``text`` with what follows its first ``lines`` lines (the description) cut to its head; a
    text without them (a query) as it is."""
    parts = text.split("\n", lines)
    if len(parts) <= lines:
        return text
    head = _head(parts[lines])
    if len(head) > DESCRIPTION_HEAD:
        head = head[:DESCRIPTION_HEAD].rsplit(" ", 1)[0]
    return "\n".join([*parts[:lines], head])


def _chunk_extractions(nodes: dict[str, list[dict[str, Any]]], edges: dict[tuple[str, str], list[dict[str, Any]]]) -> dict[str, ChunkExtraction]:
    """LightRAG's parsed extraction records, as each chunk's (``source_id``) own extraction."""
    by_chunk: dict[str, dict[tuple[str, Any], tuple[list[str], set[str]]]] = {}
    for kind, found in (("entity", nodes), ("relation", edges)):
        for key, records in found.items():
            item = ("entity", key) if kind == "entity" else ("relation", tuple(sorted(key)))
            for record in records:
                fragments, keywords = by_chunk.setdefault(str(record.get("source_id") or ""), {}).setdefault(item, ([], set()))
                fragments.append(str(record.get("description") or ""))
                keywords |= _keywords(str(record.get("keywords") or "")) if kind == "relation" else set()
    return {chunk: {item: (_fragments(f), frozenset(k)) for item, (f, k) in items.items()} for chunk, items in by_chunk.items()}


def _fragments(descriptions: Iterable[str]) -> frozenset[str]:
    """The fragments of descriptions as a merged description holds them, spaces normalised."""
    return frozenset(
        fragment
        for description in descriptions
        for fragment in (" ".join(part.split()) for part in _FRAGMENT_SEP.split(sanitize_text_for_encoding(description or "")))
        if fragment
    )


def _head(description: str) -> str:
    """The fragment of a merged description that sorts first. It merges in processing order,
    which concurrent inserts leave open: by sorting, the same fragments give the same vector."""
    return min(_fragments([description]), default="")


def _keywords(text: str) -> frozenset[str]:
    return frozenset(word.strip() for word in text.split(",") if word.strip())


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _embedded(row: Mapping[str, Any], lines: int) -> str:
    """The digest of what an entity's (``lines`` 1) or relation's (2) vector row embeds: kept by
    a packed row (:func:`_pack_for_queries`), else taken from its text."""
    return row.get(EMBEDS) or _digest(_headed(str(row.get("content") or ""), lines))


async def _node_edges(storage: Any, names: list[str]) -> dict[str, list[tuple[str, str]]]:
    if isinstance(storage, NetworkXStorage):
        graph = await storage._get_graph()
        return {name: list(graph.edges(name)) if graph.has_node(name) else [] for name in names}
    return dict(await storage.get_nodes_edges_batch(names))


@dataclass(frozen=True)
class _RowDocuments:
    """The documents behind each row of a file vector store, for masking it: a chunk's own, or
    those of the chunks an entity or relation was merged from (``source_id``). A row whose chunk
    leads to no document is never admitted. Also the documents that rebuild a row's vector
    (:meth:`LightRAGIndex._refresh_heads`), where what the row embeds is still what they were
    found for."""

    data: Sequence[dict[str, Any]]  # the rows it was built from (compared by identity)
    count: int
    codes: np.ndarray  # the rows' documents, row after row, as numbers (-1: none)
    starts: np.ndarray  # where each row's documents begin in ``codes``
    head_codes: np.ndarray  # the same for the documents that rebuild each row (-1: none)
    head_starts: np.ndarray
    numbers: dict[str, int]
    rebuilders: dict[str, frozenset[str]]  # row id → the documents that rebuild it

    @classmethod
    def of(
        cls, data: Sequence[dict[str, Any]], doc_of_chunk: Callable[[str], str | None], heads: Mapping[str, tuple[str, frozenset[str]]], lines: int
    ) -> _RowDocuments:
        numbers: dict[str, int] = {}
        codes: list[int] = []
        starts: list[int] = []
        head_codes: list[int] = []
        head_starts: list[int] = []
        rebuilders: dict[str, frozenset[str]] = {}
        for row in data:
            if "full_doc_id" in row:
                docs = [row["full_doc_id"]]
            else:
                docs = [doc_of_chunk(chunk) for chunk in str(row.get("source_id") or "").split(GRAPH_FIELD_SEP) if chunk]
            starts.append(len(codes))
            codes += [numbers.setdefault(doc, len(numbers)) if doc else -1 for doc in docs] or [-1]
            row_id = row.get("__id__", "")
            head = heads.get(row_id)
            if head is not None and head[0] == _embedded(row, lines):
                rebuilders[row_id] = head[1] if head[1].issubset(docs) else head[1].intersection(docs)  # shared, not copied
            head_starts.append(len(head_codes))
            head_codes += [numbers.setdefault(doc, len(numbers)) for doc in sorted(rebuilders.get(row_id, ()))] or [-1]
        return cls(
            data,
            len(data),
            np.asarray(codes, dtype=np.int64),
            np.asarray(starts, dtype=np.int64),
            np.asarray(head_codes, dtype=np.int64),
            np.asarray(head_starts, dtype=np.int64),
            numbers,
            rebuilders,
        )

    def admitted(self, within: Set[str]) -> np.ndarray:
        """A mask of the rows all of whose documents are ``within``, or one of the documents that
        rebuild them."""
        allowed = np.zeros(len(self.numbers) + 1, dtype=bool)  # the last slot stands for "none"
        allowed[[self.numbers[doc] for doc in within if doc in self.numbers]] = True
        if not self.count:
            return np.zeros(0, dtype=bool)
        whole = np.logical_and.reduceat(allowed[self.codes], self.starts)
        return whole | np.logical_or.reduceat(allowed[self.head_codes], self.head_starts)


def _title(text: str) -> str:
    """A document's title: its first line, when that is a Markdown heading."""
    first = text.split("\n", 1)[0]
    return first.lstrip("#").strip() if first.startswith("#") else ""


def _entity_vdb_id(row: dict[str, Any]) -> str:
    return compute_mdhash_id(row["entity_name"], prefix="ent-")


def _relation_vdb_id(row: dict[str, Any]) -> str:
    return make_relation_vdb_ids(row["src_id"], row["tgt_id"])[0]


def _graph_hits(
    kind: Literal["entity", "relation"],
    found: list[tuple[str, dict[str, Any], float]],
    sources: list[list[str]],
    doc_of: dict[str, str],
    rebuilders: Sequence[frozenset[str]] | None = None,
    *,
    named: Set[str] = frozenset(),
) -> list[GraphHit]:
    """Hits for entities/relations whose every supporting chunk resolves to a document, in order,
    each with the documents that rebuild it: ``rebuilders`` (one set per item; none when not
    given), or all of its documents for the entities the query ``named``.

    One untraceable chunk (e.g. a delete that stopped midway) drops the hit: its merged description
    may hold text whose document can no longer be authorized (DESIGN.md A4).
    """
    hits: list[GraphHit] = []
    for (name, record, score), chunk_ids, rebuilt_by in zip(found, sources, rebuilders or [frozenset()] * len(found), strict=True):
        if not chunk_ids or any(cid not in doc_of for cid in chunk_ids):
            continue
        chunk_docs = tuple(doc_of[cid] for cid in chunk_ids)
        doc_ids = frozenset(chunk_docs)
        description = (record.get("description") or "").replace(GRAPH_FIELD_SEP, "\n")
        rebuilt_by = doc_ids if name in named else rebuilt_by & doc_ids
        hits.append(GraphHit(kind, name, description, doc_ids, len(hits) + 1, tuple(chunk_ids), score, chunk_docs=chunk_docs, rebuilders=rebuilt_by))
    return hits
