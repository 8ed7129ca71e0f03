"""Every record ``render_extraction`` emits for the real Hive corpus parses back with LightRAG.

The corpus (``../shared/corpora/apache-hive-wiki``) is chunked the way the adapter configures
LightRAG (``chunking_by_token_size`` with ``RegexTokenizer``, 800/100 tokens), each chunk goes
through ``LocalExtractor`` and ``render_extraction``, and LightRAG's own text-mode parser
(``operate._process_extraction_result``) must return every entity and relation record without a
single warning (format errors, dropped records, truncated names).

The test runs a deterministic sample that includes the pages whose records used to break; the full
sweep takes a few minutes and runs as a script::

    .venv/bin/python -m tests.unit.test_extraction_corpus [page_id ...]
"""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import dataclass, field

import pytest

from core.providers.local import LocalExtractor, RegexTokenizer
from retrievers.lightrag_records import COMPLETION_DELIMITER, TUPLE_DELIMITER, render_extraction

from tests.conftest import CORPUS  # noqa: E402
CHUNK_TOKENS = 800  # core.settings defaults the adapter passes to LightRAG
OVERLAP_TOKENS = 100

# Pages whose chunks produced LightRAG format errors before the field sanitising was fixed (an
# entity named "relation"; a Markdown table whose "|" spaCy parsed as the sentence's verb, making
# "|" the keywords field), plus a spread of others (ids sorted, every 15th page).
REGRESSION_PAGES = ("42566775", "27838462", "97551656")
SAMPLE_EVERY = 15


@dataclass
class Sweep:
    chunks: int = 0
    entities_emitted: int = 0
    entities_parsed: int = 0
    relations_emitted: int = 0
    relations_parsed: int = 0
    problems: list[str] = field(default_factory=list)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def load_pages(page_ids: set[str] | None = None) -> list[tuple[str, str]]:
    """``(page id, text as indexed)`` for the corpus pages, sorted by id."""
    from pipeline.sinks.semantic import index_text
    from devstack.atlassian.export import SPACE_KEY, HiveExportSource

    pages = await HiveExportSource(CORPUS).pages(SPACE_KEY)
    return sorted((p.page_id, index_text(p)) for p in pages if page_ids is None or p.page_id in page_ids)


def chunks_of(text: str) -> list[str]:
    from lightrag.chunker.token_size import chunking_by_token_size
    from lightrag.utils import Tokenizer

    tokenizer = Tokenizer(model_name="wayfinder-regex", tokenizer=RegexTokenizer())
    chunks = chunking_by_token_size(
        tokenizer, text, chunk_overlap_token_size=OVERLAP_TOKENS, chunk_token_size=CHUNK_TOKENS
    )
    return [c["content"] for c in chunks]


async def check_pages(extractor: LocalExtractor, pages: list[tuple[str, str]]) -> Sweep:
    """Extract, render and re-parse every chunk of ``pages``; collect what did not come back."""
    from lightrag.operate import _process_extraction_result
    from lightrag.utils import logger as lightrag_logger
    from lightrag.utils import normalize_entity_name

    sweep = Sweep()
    handler = _Collect()
    lightrag_logger.addHandler(handler)  # the "lightrag" logger does not propagate
    try:
        for page_id, text in pages:
            for index, chunk in enumerate(chunks_of(text)):
                key = f"page:{page_id}-chunk-{index:03d}"
                extraction = extractor.extract(chunk)
                rendered = render_extraction(extraction)
                before = len(handler.records)
                nodes, edges = await _process_extraction_result(
                    rendered, key, 0, f"page:{page_id}", TUPLE_DELIMITER, COMPLETION_DELIMITER
                )
                sweep.chunks += 1
                sweep.entities_emitted += len(extraction.entities)
                sweep.relations_emitted += len(extraction.relations)
                sweep.entities_parsed += sum(len(v) for v in nodes.values())
                sweep.relations_parsed += sum(len(v) for v in edges.values())
                for record in handler.records[before:]:
                    sweep.problems.append(f"{key}: log {record.levelname}: {record.getMessage()}")
                names = [normalize_entity_name(name) for name, _kind, _desc in extraction.entities]
                if sorted(nodes) != sorted(names) or sum(len(v) for v in nodes.values()) != len(names):
                    sweep.problems.append(f"{key}: entities {sorted(set(names) ^ set(nodes))!r}")
                pairs = sorted(
                    (normalize_entity_name(src), normalize_entity_name(tgt)) for src, tgt, _k, _d in extraction.relations
                )
                if sorted(edges) != pairs or sum(len(v) for v in edges.values()) != len(pairs):
                    sweep.problems.append(f"{key}: relations {sorted(set(pairs) ^ set(edges))!r}")
    finally:
        lightrag_logger.removeHandler(handler)
    return sweep


@pytest.fixture(scope="module")
async def sample_pages() -> list[tuple[str, str]]:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not present at {CORPUS}")
    every = await load_pages()
    chosen = {pid for pid, _ in every[::SAMPLE_EVERY]} | set(REGRESSION_PAGES)
    return [(pid, text) for pid, text in every if pid in chosen]


@pytest.mark.timeout(120)
async def test_corpus_sample_round_trips_through_lightrag_parser(sample_pages: list[tuple[str, str]]) -> None:
    sweep = await check_pages(LocalExtractor(), sample_pages)
    assert sweep.chunks > 0 and sweep.relations_emitted > 0
    assert sweep.problems == []
    assert (sweep.entities_parsed, sweep.relations_parsed) == (sweep.entities_emitted, sweep.relations_emitted)


def main(argv: list[str]) -> int:
    import time

    started = time.perf_counter()
    pages = asyncio.run(load_pages(set(argv) or None))
    sweep = asyncio.run(check_pages(LocalExtractor(), pages))
    for problem in sweep.problems:
        print(problem)
    print(
        f"{len(pages)} pages, {sweep.chunks} chunks in {time.perf_counter() - started:.0f}s: "
        f"entities {sweep.entities_parsed}/{sweep.entities_emitted} parsed, "
        f"relations {sweep.relations_parsed}/{sweep.relations_emitted} parsed, "
        f"{len(sweep.problems)} problems"
    )
    return 1 if sweep.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
