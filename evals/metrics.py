"""Page-level retrieval metrics of one ranked list against the gold pages, their means and their
95% bootstrap intervals. A ranking is de-duplicated first: a page counts once, at its best rank."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

import numpy as np

NDCG_AT = 10
ALL_HOPS_AT = 5
RESAMPLES = 2000  # bootstrap resamples per interval
LEVEL = 0.95


def _pages(ranked: Sequence[str], gold: Collection[str]) -> tuple[list[str], set[str]]:
    wanted = set(gold)
    if not wanted:
        raise ValueError("no gold pages to score against")
    return list(dict.fromkeys(ranked)), wanted


def recall_at(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """The share of the gold pages among the first ``k``."""
    pages, wanted = _pages(ranked, gold)
    return len(wanted & set(pages[:k])) / len(wanted)


def reciprocal_rank(ranked: Sequence[str], gold: Collection[str]) -> float:
    """One over the rank of the first gold page (0 when none is ranked)."""
    pages, wanted = _pages(ranked, gold)
    return next((1.0 / rank for rank, page in enumerate(pages, start=1) if page in wanted), 0.0)


def ndcg_at(ranked: Sequence[str], gold: Collection[str], k: int = NDCG_AT) -> float:
    """Normalised discounted cumulative gain of the first ``k``, with binary gains."""
    pages, wanted = _pages(ranked, gold)
    dcg = sum(1.0 / math.log2(rank + 1) for rank, page in enumerate(pages[:k], start=1) if page in wanted)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(k, len(wanted)) + 1))
    return dcg / ideal


def all_hops_at(ranked: Sequence[str], gold: Collection[str], k: int = ALL_HOPS_AT) -> float:
    """1 when every gold page is among the first ``k`` (a multi-hop question needs them all)."""
    pages, wanted = _pages(ranked, gold)
    return float(wanted <= set(pages[:k]))


def exact(answer: Sequence[str], gold: Sequence[str]) -> float:
    """1 when a navigation answer is exactly the gold ids, in their order."""
    return float(list(answer) == list(gold))


def mean(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each metric averaged over ``rows`` (all alike), rounded to three places."""
    if not rows:
        return {}
    return {key: round(sum(row[key] for row in rows) / len(rows), 3) for key in rows[0]}


def bootstrap_ci(values: Sequence[float], *, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values`` (per-question scores), rounded
    to three places; seeded, so a report is reproducible. One value gives a point."""
    if not values:
        raise ValueError("no values to bootstrap")
    data = np.asarray(values, dtype=float)
    means = np.random.default_rng(seed).choice(data, size=(resamples, len(data)), replace=True).mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return round(float(low), 3), round(float(high), 3)


def intervals(rows: Sequence[Mapping[str, float]]) -> dict[str, list[float]]:
    """:func:`bootstrap_ci` of each metric over ``rows``."""
    if not rows:
        return {}
    return {key: list(bootstrap_ci([row[key] for row in rows])) for key in rows[0]}
