"""Can the time an answer takes tell a hidden id from a missing one? A two-sample
Kolmogorov–Smirnov test on the two samples of response times: a p-value below the level says the
two distributions differ, so timing would reveal that the hidden object exists."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

#: below this p-value, the two samples are told apart
LEVEL = 0.01


def ks_statistic(first: Sequence[float], second: Sequence[float]) -> float:
    """The largest distance between the two samples' empirical distribution functions."""
    if not first or not second:
        raise ValueError("both samples need at least one value")
    a, b = sorted(first), sorted(second)
    return max(
        abs(bisect.bisect_right(a, x) / len(a) - bisect.bisect_right(b, x) / len(b))
        for x in (*a, *b)
    )


def ks_p_value(first: Sequence[float], second: Sequence[float]) -> float:
    """The asymptotic two-sided p-value of the two-sample test (Kolmogorov's distribution, with
    Stephens' small-sample correction): the chance of a distance this large were the two samples
    drawn from one distribution."""
    d = ks_statistic(first, second)
    n = len(first) * len(second) / (len(first) + len(second))
    x = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    if x < 1e-3:
        return 1.0
    total = sum((-1) ** (k - 1) * math.exp(-2 * k * k * x * x) for k in range(1, 101))
    return min(1.0, max(0.0, 2 * total))


def told_apart(first: Sequence[float], second: Sequence[float], level: float = LEVEL) -> bool:
    return ks_p_value(first, second) < level
