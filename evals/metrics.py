"""Page-level retrieval metrics of one ranked list against the gold pages, and their means."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence

NDCG_AT = 10
ALL_HOPS_AT = 5


def score(ranked: Sequence[str], gold: Collection[str], ks: Iterable[int]) -> dict[str, float]:
    """recall@k for each k (share of the gold pages among the first k), MRR (one over the rank of
    the first gold page), nDCG@10 (binary gains) and all-hops recall@5 (1 when every gold page is
    among the first five)."""
    wanted = set(gold)
    if not wanted:
        raise ValueError("no gold pages to score against")
    ranked = list(dict.fromkeys(ranked))
    result = {f"recall@{k}": len(wanted & set(ranked[:k])) / len(wanted) for k in ks}
    result["mrr"] = next((1.0 / rank for rank, doc in enumerate(ranked, start=1) if doc in wanted), 0.0)
    dcg = sum(1.0 / math.log2(rank + 1) for rank, doc in enumerate(ranked[:NDCG_AT], start=1) if doc in wanted)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(NDCG_AT, len(wanted)) + 1))
    result[f"ndcg@{NDCG_AT}"] = dcg / ideal
    result[f"all_hops@{ALL_HOPS_AT}"] = float(wanted <= set(ranked[:ALL_HOPS_AT]))
    return result


def mean(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each metric averaged over ``rows`` (all alike), rounded to three places."""
    if not rows:
        return {}
    return {key: round(sum(row[key] for row in rows) / len(rows), 3) for key in rows[0]}
