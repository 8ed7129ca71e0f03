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
CALLS_PLOT = "agent_calls.png"
TOKENS_PLOT = "agent_tokens_vs_success.png"
AGENT_FIELDS = ("questions", "solved", "success_rate", "median_calls_to_gold", "tokens_per_solved", "median_tokens_per_question", "tool_definition_tokens", "errors")


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
    agents: dict[str, dict[str, Any]] | None = None,
    refused: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The report of one dataset's run; ``agents``: :func:`evals.agent.summarise` per toolset;
    ``refused``: per system, the questions it answered with an error (scored as no pages)."""
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
        "agent": agents or {},
        "refused": {system: ids for system, ids in (refused or {}).items() if ids},
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
    plots = [*_plot_recall(report, directory / RECALL_PLOT), *_plot_agents(report, directory)]
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


def _plot_agents(report: dict[str, Any], directory: Path) -> list[str]:
    agents = {name: summary for name, summary in report["agent"].items() if summary.get("questions")}
    if not agents:
        return []
    figure = Figure(figsize=(6, 4), layout="tight")
    axes = figure.subplots()
    most = max(len(s["per_question"]) for s in agents.values())
    calls = sorted({q["solved_at"] for s in agents.values() for q in s["per_question"] if q["solved_at"] is not None})
    buckets = [*map(str, calls), "not solved"]
    width = 0.8 / len(agents)
    for n, (name, summary) in enumerate(agents.items()):
        counts = [sum(q["solved_at"] == c for q in summary["per_question"]) for c in calls]
        counts.append(sum(q["solved_at"] is None for q in summary["per_question"]))
        axes.bar([i + n * width for i in range(len(buckets))], counts, width=width, label=name)
    axes.set(xlabel="tool calls until a gold page was open", ylabel="questions", xticks=[i + width * (len(agents) - 1) / 2 for i in range(len(buckets))], ylim=(0, most + 1))
    axes.set_xticklabels(buckets)
    axes.legend()
    figure.savefig(directory / CALLS_PLOT, dpi=100)

    figure = Figure(figsize=(6, 4), layout="tight")
    axes = figure.subplots()
    placed = {name: s for name, s in agents.items() if s["tokens_per_solved"] is not None}
    for name, summary in placed.items():
        axes.scatter([summary["tokens_per_solved"]], [summary["success_rate"]], s=80, label=name)
    widest = max((s["tokens_per_solved"] for s in placed.values()), default=1)
    axes.set(xlabel="tokens per solved question (o200k)", ylabel="share of questions solved", ylim=(0, 1.05), xlim=(0, widest * 1.15))
    axes.grid(alpha=0.3)
    axes.legend()
    figure.savefig(directory / TOKENS_PLOT, dpi=100)
    return [CALLS_PLOT, TOKENS_PLOT]


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
    agents = report["agent"]
    if agents:
        lines += [
            "The scripted agent (search with the question, open the hits in order until a gold page is open, at most "
            "six calls); tokens are the tool definitions plus every answer read, o200k_base:",
            "",
            "| toolset | " + " | ".join(AGENT_FIELDS) + " |",
            "|---|" + "---:|" * len(AGENT_FIELDS),
            *(f"| {name} | " + " | ".join(str(summary.get(f)) for f in AGENT_FIELDS) + " |" for name, summary in agents.items()),
            "",
        ]
    for system, ids in report["refused"].items():
        lines += [f"{system} answered {len(ids)} question(s) with an error, scored as no pages: {', '.join(ids)}.", ""]
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
    if report["agent"]:
        table = Table(title="the scripted agent, per toolset")
        table.add_column("toolset")
        for name in AGENT_FIELDS:
            table.add_column(name, justify="right")
        for toolset, summary in report["agent"].items():
            table.add_row(toolset, *(str(summary.get(name)) for name in AGENT_FIELDS))
        console.print(table)
    for system, ids in report["refused"].items():
        console.print(f"{system} answered {len(ids)} question(s) with an error, scored as no pages: {', '.join(ids)}")
    if report["not_asked"]:
        console.print(f"not asked (navigation questions without a nav object): {', '.join(report['not_asked'])}")
    if report["no_visible_gold"]:
        console.print(f"skipped, no gold page visible to {report['principal']}: {', '.join(report['no_visible_gold'])}")
