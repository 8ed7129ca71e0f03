"""What the semantic index needs from model providers, as two small Protocols.

An ``Embedder`` turns passages into vectors; an ``Extractor`` turns a passage into entities and
relations and a query into keywords. The offline implementations live in ``core.providers.local``;
hosted models (Gemini) plug in through the same shapes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

#: ``(name, type, description)``
Entity = tuple[str, str, str]
#: ``(source, target, keywords, description)``
Relation = tuple[str, str, str, str]


@dataclass(frozen=True)
class Extraction:
    """Entities and relations found in one passage."""

    entities: list[Entity] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)


@runtime_checkable
class Embedder(Protocol):
    """Turns passages into fixed-size vectors (one row per passage).

    ``name`` identifies the model and its output size: vectors from two embedders with different
    names are not comparable, so an index remembers the name it was built with."""

    dim: int
    name: str

    async def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        """Return an array of shape ``(len(texts), dim)``. ``query``: the texts are search queries,
        not passages (models trained for retrieval embed the two differently)."""
        ...


@runtime_checkable
class Extractor(Protocol):
    """Finds entities and relations in text, and search keywords in a query.

    ``name`` identifies the model and the version of its method: an index re-extracts documents
    extracted under another name."""

    name: str

    def extract(self, text: str) -> Extraction:
        """Entities and relations stated in ``text``."""
        ...

    def keywords(self, query: str) -> tuple[list[str], list[str]]:
        """``(high_level, low_level)`` keywords: themes and concepts, then named things."""
        ...

    def prefetch(self, texts: Sequence[str]) -> None:
        """A hint: ``extract`` will soon be asked for these texts. An extractor that can work
        ahead (in other processes, or by batching a hosted model's calls) starts now; one that
        cannot ignores it."""
        ...

    def close(self) -> None:
        """Release workers or clients; the extractor may be used again afterwards."""
        ...


@dataclass(frozen=True)
class ImageContext:
    """An image and where it sits: what alt text is written from."""

    filename: str
    media_type: str
    data: bytes
    page_title: str
    heading_path: tuple[str, ...]
    context: str  # the text around the image
    caption: str  # the author's caption or alt text, if any


@runtime_checkable
class AltTextWriter(Protocol):
    """Writes alt text for an image in its context. ``source`` names the writer in the cache."""

    source: str

    async def describe(self, image: ImageContext) -> str: ...


T = TypeVar("T")


class Ahead(Generic[T]):
    """Work started before it is asked for, in a pool made on first use: ``hint`` starts
    ``work`` on texts, ``batch`` texts to a task (``work`` takes a list, returns a result per
    text), and ``take`` returns the started result for a text (or starts it now, alone). Hints
    never taken are forgotten after two more rounds of hints, so a text hinted and then not needed
    does not stay in memory. ``close`` drops what is pending and stops the pool (a later call
    makes a new one)."""

    def __init__(self, make_pool: Callable[[], Executor], work: Callable[[list[str]], list[T]], batch: int = 1) -> None:
        self._make_pool, self._work, self._batch = make_pool, work, batch
        self._pool: Executor | None = None
        self._held: dict[str, tuple[int, Future[T]]] = {}  # text -> (round of its hint, result)
        self._round = 0
        self._lock = threading.Lock()

    def hint(self, texts: Sequence[str]) -> None:
        with self._lock:
            self._round += 1
            self._held = {text: (r, f) for text, (r, f) in self._held.items() if r >= self._round - 1}
            new = list(dict.fromkeys(text for text in texts if text not in self._held))
            for start in range(0, len(new), self._batch):
                group = new[start : start + self._batch]
                self._held.update((text, (self._round, result)) for text, result in zip(group, self._start(group), strict=True))

    def take(self, text: str) -> Future[T]:
        with self._lock:
            held = self._held.pop(text, None)
            return held[1] if held else self._start([text])[0]

    def close(self) -> None:
        with self._lock:
            pool, self._pool, self._held = self._pool, None, {}
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _start(self, texts: list[str]) -> list[Future[T]]:
        if self._pool is None:
            self._pool = self._make_pool()
        task = self._pool.submit(self._work, texts)
        results: list[Future[T]] = [Future() for _ in texts]

        def settle(done: Future[list[T]]) -> None:
            for n, result in enumerate(results):
                if done.cancelled():
                    result.cancel()
                elif not result.set_running_or_notify_cancel():
                    continue
                elif (error := done.exception()) is not None:
                    result.set_exception(error)
                else:
                    result.set_result(done.result()[n])

        task.add_done_callback(settle)
        return results


@dataclass
class ModelUsage:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False  # token counts estimated from text length (the API reported none)


@dataclass
class Usage:
    """Calls and tokens spent on hosted models, per model: what a run reports and what it cost."""

    models: dict[str, ModelUsage] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, model: str, *, input_tokens: int, output_tokens: int = 0, estimated: bool = False) -> None:
        with self._lock:
            usage = self.models.setdefault(model, ModelUsage())
            usage.calls += 1
            usage.input_tokens += input_tokens
            usage.output_tokens += output_tokens
            usage.estimated |= estimated

    def cost_usd(self, prices: dict[str, tuple[float, float]]) -> tuple[float, list[str]]:
        """The cost at ``prices`` (model → USD per million input and output tokens), and the models
        used that have no price."""
        total, unpriced = 0.0, []
        for model, usage in sorted(self.models.items()):
            if model not in prices:
                unpriced.append(model)
                continue
            per_input, per_output = prices[model]
            total += (usage.input_tokens * per_input + usage.output_tokens * per_output) / 1e6
        return total, unpriced

    def summary(self, prices: dict[str, tuple[float, float]]) -> str | None:
        """One line for a run's report, or None when no hosted model was called."""
        if not self.models:
            return None
        parts = []
        for model, usage in sorted(self.models.items()):
            approx = "~" if usage.estimated else ""
            parts.append(f"{model}: {usage.calls} call(s), {approx}{usage.input_tokens:,} in / {usage.output_tokens:,} out tokens")
        cost, unpriced = self.cost_usd(prices)
        line = "; ".join(parts) + f"; about ${cost:.4f}"
        if unpriced:
            line += f" (no price for {', '.join(unpriced)})"
        return line
