"""An evaluation's report: built from the runs of :mod:`evals.runner`, written as a directory
``eval-<dataset>-<date>/`` holding ``report.json`` (field names kept stable from run to run),
``report.md`` and the plots, and shown as a table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure  # not pyplot: no global state, no display needed
from rich.console import Console
from rich.table import Table

from evals import metrics
from evals.datasets import Question
from evals.runner import DEPTH, NAVIGATOR, Outcome, Prepared

RECALL_PLOT = "recall_at_k.png"


def dataset_name(path: Path) -> str:
    """What a report calls a question file: its folder for the corpora's ``questions*`` files
    (``apache-hive-wiki``), else its name without the suffix."""
    return path.parent.name if path.stem.startswith("questions") else path.stem


def build(
    path: Path,
    principal: str,
    day: date,
    questions: Sequence[Question],
    prepared: Sequence[Prepared],
    searched: dict[str, Outcome],
    navigated: dict[str, Outcome],
) -> dict[str, Any]:
    kind_of = {p.question.id: p.question.kind for p in prepared}
    scored = [p for p in prepared if p.question.searchable and p.gold]
    kinds = sorted({p.question.kind for p in scored})
    systems: dict[str, Any] = {}
    for system, outcome in searched.items():
        rows = [outcome.scores[p.question.id] for p in scored]
        systems[system] = {
            "all": metrics.mean(rows),
            "ci95": metrics.intervals(rows),
            "by_kind": {kind: metrics.mean([outcome.scores[p.question.id] for p in scored if kind_of[p.question.id] == kind]) for kind in kinds},
            "recall_curve": [
                round(sum(metrics.recall_at(outcome.answers[p.question.id], p.gold, k) for p in scored) / len(scored), 3) if scored else 0.0
                for k in range(1, DEPTH + 1)
            ],
        }
    asked = [p for p in prepared if p.question.nav is not None and p.gold]
    navigation: dict[str, Any] = {"questions": len(asked)}
    if navigated and asked:
        outcome = navigated[NAVIGATOR]
        rows = [outcome.scores[p.question.id] for p in asked]
        navigation |= {
            "exact": metrics.mean(rows)["exact"],
            "ci95": metrics.intervals(rows)["exact"],
            "per_question": [
                {"id": p.question.id, "op": p.question.nav.op if p.question.nav else "", "gold": list(p.gold), "answer": outcome.answers[p.question.id]}
                for p in asked
            ],
        }
    name = dataset_name(path)
    return {
        "report": f"eval-{name}-{day.isoformat()}",
        "dataset": str(path),
        "date": day.isoformat(),
        "principal": principal,
        "questions": len(questions),
        "scored": len(scored),
        "not_asked": [q.id for q in questions if not q.searchable and q.nav is None],  # navigation without a nav object
        "no_visible_gold": [p.question.id for p in prepared if not p.gold],
        "left_out": {p.question.id: list(p.left_out) for p in prepared if p.left_out},
        "systems": systems,
        "navigation": navigation,
        "per_question": [
            {
                "id": p.question.id,
                "kind": p.question.kind,
                "gold": list(p.gold),
                "ranks": {
                    system: [o.answers[p.question.id].index(g) + 1 if g in o.answers[p.question.id] else None for g in p.gold]
                    for system, o in searched.items()
                },
            }
            for p in scored
        ],
    }


def write(report: dict[str, Any], reports_dir: Path) -> Path:
    """The report's directory under ``reports_dir``: ``report.json``, ``report.md``, the plots."""
    directory = reports_dir / report["report"]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    plots = _plot_recall(report, directory / RECALL_PLOT)
    (directory / "report.md").write_text(markdown(report, plots))
    return directory


def _plot_recall(report: dict[str, Any], path: Path) -> list[str]:
    if not report["scored"]:
        path.unlink(missing_ok=True)
        return []
    figure = Figure(figsize=(6, 4), layout="tight")
    axes = figure.subplots()
    ks = list(range(1, DEPTH + 1))
    for system, values in report["systems"].items():
        axes.plot(ks, values["recall_curve"], marker="o", label=system)
    axes.set(xlabel="k (pages)", ylabel="page recall@k", ylim=(0, 1.02), xticks=ks, title=f"{report['report']} as {report['principal']}")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.savefig(path, dpi=100)
    return [path.name]


def markdown(report: dict[str, Any], plots: Sequence[str] = ()) -> str:
    lines = [
        f"# {report['report']}",
        "",
        f"`{report['dataset']}` as **{report['principal']}**: {report['scored']} of {report['questions']} question(s) scored by search, "
        f"{report['navigation']['questions']} by the navigator. Bracketed: 95% bootstrap interval of the mean over questions.",
        "",
    ]
    systems = report["systems"]
    if systems:
        names = list(next(iter(systems.values()))["all"])
        lines += ["| system | kind | " + " | ".join(names) + " |", "|---|---|" + "---:|" * len(names)]
        for system, values in systems.items():
            lines.append(f"| {system} | all | " + " | ".join(f"{values['all'][m]:.3f} [{values['ci95'][m][0]:.2f}, {values['ci95'][m][1]:.2f}]" for m in names) + " |")
            for kind, by_kind in values["by_kind"].items():
                lines.append(f"| {system} | {kind} | " + " | ".join(f"{by_kind[m]:.3f}" for m in names) + " |")
        lines.append("")
    navigation = report["navigation"]
    if "exact" in navigation:
        low, high = navigation["ci95"]
        lines += [f"Navigation exactness ({NAVIGATOR}): **{navigation['exact']:.3f}** [{low:.2f}, {high:.2f}] over {navigation['questions']} question(s).", ""]
    for field, text in (("no_visible_gold", "Skipped, no gold page visible to the principal"), ("not_asked", "Navigation questions without a nav object, not asked")):
        if report[field]:
            lines += [f"{text}: {', '.join(report[field])}.", ""]
    if report["left_out"]:
        lines += [f"Gold pages left out (hidden from the principal or not indexed): {sum(map(len, report['left_out'].values()))} in {len(report['left_out'])} question(s).", ""]
    lines += [f"![{plot}]({plot})" for plot in plots]
    return "\n".join(lines).rstrip() + "\n"


def show(report: dict[str, Any], console: Console) -> None:
    systems = report["systems"]
    if systems:
        names = list(next(iter(systems.values()))["all"])
        table = Table(title=f"{report['dataset']} — {report['scored']} question(s) as {report['principal']}")
        table.add_column("system")
        table.add_column("kind")
        for name in names:
            table.add_column(name, justify="right")
        for system, values in systems.items():
            for kind, row in [("all", values["all"]), *values["by_kind"].items()]:
                table.add_row(system, kind, *(f"{row[m]:.3f}" for m in names))
        console.print(table)
        console.print("95% bootstrap intervals of each mean: in report.md and report.json")
    navigation = report["navigation"]
    if "exact" in navigation:
        console.print(f"navigation exactness ({NAVIGATOR}): {navigation['exact']:.3f} over {navigation['questions']} question(s)")
    if report["not_asked"]:
        console.print(f"not asked (navigation questions without a nav object): {', '.join(report['not_asked'])}")
    if report["no_visible_gold"]:
        console.print(f"skipped, no gold page visible to {report['principal']}: {', '.join(report['no_visible_gold'])}")
