"""The metrics of :mod:`evals.metrics` as ``pydantic_evals`` evaluators. A case's
``expected_output`` is its gold pages (those the principal may see), its output the pages a
system ranked (or the ids a navigator answered), best first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_evals.evaluators import Evaluator, EvaluatorContext

from evals import metrics

Context = EvaluatorContext[str, list[str], dict[str, Any]]


def _gold(ctx: Context) -> Sequence[str]:
    if not ctx.expected_output:
        raise ValueError(f"case {ctx.name!r} has no gold pages")
    return ctx.expected_output


@dataclass
class PageRecall(Evaluator[str, list[str], dict[str, Any]]):
    k: int

    def get_default_evaluation_name(self) -> str:
        return f"recall@{self.k}"

    def evaluate(self, ctx: Context) -> float:
        return metrics.recall_at(ctx.output, _gold(ctx), self.k)


@dataclass
class ReciprocalRank(Evaluator[str, list[str], dict[str, Any]]):
    def get_default_evaluation_name(self) -> str:
        return "mrr"

    def evaluate(self, ctx: Context) -> float:
        return metrics.reciprocal_rank(ctx.output, _gold(ctx))


@dataclass
class Ndcg(Evaluator[str, list[str], dict[str, Any]]):
    k: int = metrics.NDCG_AT

    def get_default_evaluation_name(self) -> str:
        return f"ndcg@{self.k}"

    def evaluate(self, ctx: Context) -> float:
        return metrics.ndcg_at(ctx.output, _gold(ctx), self.k)


@dataclass
class AllHops(Evaluator[str, list[str], dict[str, Any]]):
    k: int = metrics.ALL_HOPS_AT

    def get_default_evaluation_name(self) -> str:
        return f"all_hops@{self.k}"

    def evaluate(self, ctx: Context) -> float:
        return metrics.all_hops_at(ctx.output, _gold(ctx), self.k)


@dataclass
class NavigationExact(Evaluator[str, list[str], dict[str, Any]]):
    def get_default_evaluation_name(self) -> str:
        return "exact"

    def evaluate(self, ctx: Context) -> float:
        return metrics.exact(ctx.output, _gold(ctx))


def ranking(ks: Sequence[int]) -> list[Evaluator[str, list[str], dict[str, Any]]]:
    """The evaluators of a search dataset: recall@k for each k, MRR, nDCG@10, all-hops@5."""
    return [*(PageRecall(k) for k in ks), ReciprocalRank(), Ndcg(), AllHops()]
