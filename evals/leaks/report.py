"""Counts of a leak-suite run, per category, as JSON for run-to-run comparison and as a table."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from rich.console import Console
from rich.table import Table

Verdict = Literal["ok", "leak", "false_denial", "error"]
MAX_EXAMPLES = 50


class Answered(Protocol):
    @property
    def error(self) -> str | None: ...

    @property
    def data(self) -> dict[str, Any] | None: ...


def access_verdict(expected_visible: bool, answer: Answered, obj: str, refusal: str) -> Verdict:
    """A probe of one object: its own answer if visible, the expected refusal if not."""
    if expected_visible:
        return "ok" if answer.error is None and (answer.data or {}).get("id") == obj else "false_denial"
    return refusal_verdict(answer, refusal)


def refusal_verdict(answer: Answered, refusal: str) -> Verdict:
    """A probe that must be refused: data is a leak, another error than the expected one an error."""
    if answer.error is None:
        return "leak"
    return "ok" if answer.error.startswith(refusal) else "error"


@dataclass
class Tally:
    probes: int = 0
    leaks: int = 0
    false_denials: int = 0
    errors: int = 0  # broke the contract without leaking or denying (a slow or wrong error)


@dataclass
class Report:
    by_category: dict[str, Tally] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    actors: list[str] = field(default_factory=list)
    pages: int = 0
    seconds: float = 0.0
    timing: dict[str, dict[str, float]] = field(default_factory=dict)  # tool → p-value and medians, hidden vs missing

    def record(self, category: str, verdict: Verdict, what: str) -> None:
        tally = self.by_category.setdefault(category, Tally())
        tally.probes += 1
        if verdict == "leak":
            tally.leaks += 1
        elif verdict == "false_denial":
            tally.false_denials += 1
        elif verdict == "error":
            tally.errors += 1
        if verdict != "ok" and len(self.failures) < MAX_EXAMPLES:
            self.failures.append(f"{category}: {verdict}: {what}")

    def total(self, name: str) -> int:
        return sum(getattr(t, name) for t in self.by_category.values())

    @property
    def passed(self) -> bool:
        return self.total("leaks") == self.total("false_denials") == self.total("errors") == 0

    def as_json(self) -> dict[str, object]:
        return {
            "probes": self.total("probes"),
            "leaks": self.total("leaks"),
            "false_denials": self.total("false_denials"),
            "errors": self.total("errors"),
            "by_category": {name: asdict(t) for name, t in sorted(self.by_category.items())},
            "actors": self.actors,
            "pages": self.pages,
            "seconds": round(self.seconds, 1),
            "timing": self.timing,
            "failures": self.failures,
        }

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.as_json(), indent=2) + "\n")

    def show(self, console: Console) -> None:
        table = Table("category", "probes", "leaks", "false denials", "errors", title="leak suite")
        for name, t in sorted(self.by_category.items()):
            table.add_row(name, str(t.probes), str(t.leaks), str(t.false_denials), str(t.errors))
        table.add_row(
            "[bold]all[/bold]",
            *(f"[bold]{self.total(n)}[/bold]" for n in ("probes", "leaks", "false_denials", "errors")),
        )
        console.print(table)
        for failure in self.failures:
            console.print(f"[red]✗[/red] {failure}")
