"""The lexical channel: BM25 (``bm25s``, English stemming and stopwords) over the chunks of the
semantic index, each chunk preceded by its page's title, so a title match counts in every chunk of
the page.

A search narrowed to some documents (the caller's, as the pre-filter knows them) scores their
chunks as an index of those documents alone would: a term's rarity and the average chunk length are
counted over them only. So how often a term occurs in pages the caller may not see does not move
the ranking of those they may (DESIGN.md A4), and a reader of a small share of the corpus gets the
ranking their own pages would give, not one shaped by everyone else's.

Engineers ask with exact identifiers (property names, commands, error text); embeddings blur them,
BM25 does not. The chunks and their documents are kept in one JSON file beside the index; the BM25
matrix is built from it in memory when first searched after a change (a few seconds for tens of
thousands of chunks).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
import Stemmer

from core.files import write_atomically

_STEMMER = Stemmer.Stemmer("english")


@dataclass(frozen=True)
class LexicalEntry:
    doc_id: str
    text: str  # the page title, a line break, the chunk


def tokens(texts: list[str]) -> list[list[str]]:
    """Each text's terms as the index counts them: stemmed, English stopwords out."""
    return bm25s.tokenize(texts, stopwords="en", stemmer=_STEMMER, return_ids=False, show_progress=False)


def _idf(occurs: int, among: int) -> float:
    """BM25's (Lucene's) inverse document frequency, as bm25s computes it."""
    return math.log(1 + (among - occurs + 0.5) / (occurs + 0.5))


class LexicalIndex:
    """Chunk id → (document, text), searchable with BM25. Not safe for concurrent writers."""

    def __init__(self, entries: Mapping[str, LexicalEntry] | None = None) -> None:
        self._entries: dict[str, LexicalEntry] = dict(entries or {})
        self._model: bm25s.BM25 | None = None
        self._order: list[str] = []
        self._lengths = np.zeros(0)  # row → its chunk's length in tokens, as bm25s counts it
        self._doc_codes = np.zeros(0, dtype=np.int32)  # row → its document's number in _docs
        self._docs: dict[str, int] = {}
        self._chunks: dict[str, list[str]] = {}  # document → its chunks

    # -- contents ---------------------------------------------------------------------------------

    @property
    def doc_ids(self) -> set[str]:
        return {entry.doc_id for entry in self._entries.values()}

    def __len__(self) -> int:
        return len(self._entries)

    def replace(self, removed: Iterable[str], added: Mapping[str, LexicalEntry]) -> None:
        """Drop every chunk of the ``removed`` documents, then add ``added``."""
        gone = set(removed)
        self._entries = {cid: e for cid, e in self._entries.items() if e.doc_id not in gone}
        self._entries.update(added)
        self._model = None

    @classmethod
    def load(cls, path: Path) -> LexicalIndex | None:
        """The index saved at ``path``, or None when there is none (or it cannot be read)."""
        try:
            raw = json.loads(path.read_text())
            return cls({cid: LexicalEntry(doc, text) for cid, (doc, text) in raw["chunks"].items()})
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, path: Path) -> None:
        write_atomically(path, json.dumps({"chunks": {cid: [e.doc_id, e.text] for cid, e in self._entries.items()}}))

    def chunks_of(self, docs: Collection[str]) -> list[str]:
        """The ids of the chunks of ``docs``, in order."""
        self._built()
        return sorted(cid for doc in docs for cid in self._chunks.get(doc, ()))

    def doc_of(self, chunk_id: str) -> str | None:
        entry = self._entries.get(chunk_id)
        return entry.doc_id if entry else None

    def chunk_text(self, chunk_id: str) -> str:
        """The chunk as indexed, without the title line in front of it."""
        return self._entries[chunk_id].text.split("\n", 1)[-1]

    # -- search -----------------------------------------------------------------------------------

    def search(self, query: str, k: int, within: Collection[str] | None = None) -> list[tuple[str, str, float]]:
        """Up to ``k`` (chunk id, document, BM25 score) with a score above zero, best first; only
        chunks of the documents ``within``, when given."""
        terms = tokens([query])[0]
        if not terms or not self._entries:
            return []
        model = self._built()
        if within is None:
            scores = model.get_scores(terms)
        else:
            scores = self._scores_among(model, terms, self._rows_of(within))
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        ranked = sorted(((float(scores[i]), self._order[i]) for i in top if scores[i] > 0), key=lambda s: (-s[0], s[1]))
        return [(cid, self._entries[cid].doc_id, score) for score, cid in ranked]

    def term_weights(self, query: str, within: Collection[str] | None = None) -> dict[str, float]:
        """The query's terms (as :func:`tokens` gives them) that occur in the index, each with
        its IDF, counted over the chunks of the documents ``within`` when given (as
        :meth:`search` counts it); a term none of those chunks holds is left out."""
        terms = sorted(set(tokens([query])[0]))
        if not terms or not self._entries:
            return {}
        model = self._built()
        indices, indptr = model.scores["indices"], model.scores["indptr"]
        rows = self._rows_of(within) if within is not None else None
        among = len(self._order) if rows is None else int(rows.sum())
        weights = {}
        for term in terms:
            token = model.vocab_dict.get(term)
            if token is None:
                continue
            postings = indices[indptr[token] : indptr[token + 1]]
            occurs = len(postings) if rows is None else int(rows[postings].sum())
            if occurs:
                weights[term] = _idf(occurs, among)
        return weights

    def _built(self) -> bm25s.BM25:
        if self._model is None:
            self._order = sorted(self._entries)
            model = bm25s.BM25()
            chunks = tokens([self._entries[cid].text for cid in self._order])
            model.index(chunks, show_progress=False)
            self._lengths = np.fromiter((len(chunk) for chunk in chunks), dtype=np.float64, count=len(chunks))
            self._docs = {doc: n for n, doc in enumerate(sorted(self.doc_ids))}
            self._doc_codes = np.fromiter((self._docs[self._entries[cid].doc_id] for cid in self._order), dtype=np.int32, count=len(self._order))
            self._chunks = {}
            for cid in self._order:
                self._chunks.setdefault(self._entries[cid].doc_id, []).append(cid)
            self._model = model
        return self._model

    def _scores_among(self, model: bm25s.BM25, terms: list[str], rows: np.ndarray) -> np.ndarray:
        """BM25 of the chunks in ``rows`` (a mask) as an index of those chunks alone would score
        them: each term's document frequency and the average chunk length counted over them; zero
        elsewhere. bm25s stores, term by term, the corpus-wide IDF times the term-frequency part
        ``tf / (tf + k1 * (1 - b + b * length / average))``; each is turned back into the term's
        count in the chunk and scored again."""
        data, indices, indptr = model.scores["data"], model.scores["indices"], model.scores["indptr"]
        total, among = len(rows), int(rows.sum())
        scores = np.zeros(total, dtype=np.float64)
        if not among:
            return scores
        lengths = self._lengths
        corpus_norm = model.k1 * (1 - model.b + model.b * lengths / lengths.mean())
        own_norm = model.k1 * (1 - model.b + model.b * lengths / lengths[rows].mean())
        for token in model.get_tokens_ids(terms):
            start, end = indptr[token], indptr[token + 1]
            inside = rows[indices[start:end]]
            found = indices[start:end][inside]
            if not len(found):
                continue
            part = data[start:end][inside] / _idf(end - start, total)
            count = np.rint(part * corpus_norm[found] / (1 - part))
            scores[found] += _idf(len(found), among) * count / (count + own_norm[found])
        return scores

    def _rows_of(self, docs: Collection[str]) -> np.ndarray:
        """A mask of the rows whose chunk belongs to one of ``docs``."""
        wanted = np.zeros(len(self._docs), dtype=bool)
        wanted[[self._docs[doc] for doc in docs if doc in self._docs]] = True
        return wanted[self._doc_codes]
