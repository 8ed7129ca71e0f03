"""An evaluation's report: built from the runs of :mod:`evals.runner`, written as a directory
``eval-<dataset>-<date>/`` holding ``report.json`` (field names kept stable from run to run),
``report.md`` and the plots, and shown as a table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure  # not pyplot: no global state, no display needed
from rich.console import Console
from rich.table import Table

from evals import metrics
from evals.datasets import Question
from evals.runner import DEPTH, NAVIGATOR, Outcome, Prepared

AGENT_FIELDS = ("questions", "solved", "success_rate", "median_calls_to_gold", "tokens_per_solved", "median_tokens_per_question", "tool_definition_tokens", "errors")


def dataset_name(path: Path) -> str:
    """What a report calls a question file: its folder for the corpora's ``questions*`` files
    (``apache-hive-wiki``), else its name without the suffix."""
    return path.parent.name if path.stem.startswith("questions") else path.stem


@dataclass(frozen=True)
class Run:
    """One principal's run over a dataset (:func:`evals.runner.evaluate` and the agent)."""

    prepared: Sequence[Prepared]
    searched: dict[str, Outcome]
    navigated: dict[str, Outcome]
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)  # evals.agent.summarise per toolset
    refused: dict[str, list[str]] = field(default_factory=dict)  # per system, questions answered with an error
    unauthorized: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # Systems.unauthorized
    visible: frozenset[str] | None = None  # every page the principal may see, by the leak oracle
    red_team: dict[str, Any] | None = None  # evals.redteam.Attack.summary, over the whole index
    gemini: dict[str, Any] = field(default_factory=dict)  # answers graded and the Gemini agent, or why skipped


def build(path: Path, day: date, questions: Sequence[Question], runs: dict[str, Run]) -> dict[str, Any]:
    """The report of one dataset: each principal's run, side by side."""
    return {
        "report": f"eval-{dataset_name(path)}-{day.isoformat()}",
        "dataset": str(path),
        "date": day.isoformat(),
        "questions": len(questions),
        "principals": {user: _principal(questions, run) for user, run in runs.items()},
    }


def _principal(questions: Sequence[Question], run: Run) -> dict[str, Any]:
    prepared, searched, navigated = run.prepared, run.searched, run.navigated
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
    return {
        "scored": len(scored),
        "not_asked": [q.id for q in questions if not q.searchable and q.nav is None],  # navigation without a nav object
        "no_visible_gold": [p.question.id for p in prepared if not p.gold],
        "left_out": {p.question.id: list(p.left_out) for p in prepared if p.left_out},
        "systems": systems,
        "navigation": navigation,
        "agent": run.agents,
        "refused": {system: ids for system, ids in run.refused.items() if ids},
        "authorization": _authorization(run),
        "gemini": run.gemini,
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


def _authorization(run: Run) -> dict[str, Any]:
    """What the principal was shown that the leak oracle says it may not see (``leaks``, must be
    empty), how often each system drew a hidden page before authorization (``exposure_rate``, over
    the search questions it was asked), and how much of the search questions' gold permissions
    put out of reach: ``oracle_recall@5`` is the most any system that shows only visible pages can
    reach against all the gold, beside what each reached."""
    if run.visible is None:
        return {}
    visible = run.visible
    shown: dict[str, set[str]] = {}
    for system, outcome in [*run.searched.items(), *((f"navigator:{n}", o) for n, o in run.navigated.items())]:
        shown.setdefault(system, set()).update(page for answer in outcome.answers.values() for page in answer)
    for toolset, summary in run.agents.items():
        shown.setdefault(f"agent:{toolset}", set()).update(page for q in summary.get("per_question", []) for page in q["opened"])
    searchable = [p for p in run.prepared if p.question.searchable]
    every_gold = {p.question.id: set(p.gold) | set(p.left_out) for p in searchable}
    return {
        "visible_pages": len(visible),
        "leaks": {system: sorted(pages - visible) for system, pages in shown.items()},
        "exposure_rate": {
            system: round(sum(bool(set(pages) - visible) for pages in drawn.values()) / len(drawn), 3)
            for system, drawn in run.unauthorized.items()
            if drawn
        },
        "oracle_recall@5": round(sum(min(5, len(p.gold)) / len(every_gold[p.question.id]) for p in searchable) / len(searchable), 3) if searchable else None,
        "recall@5_all_gold": {
            system: round(
                sum(len(set(outcome.answers.get(p.question.id, [])[:5]) & set(p.gold)) / len(every_gold[p.question.id]) for p in searchable) / len(searchable), 3
            )
            for system, outcome in run.searched.items()
        }
        if searchable
        else {},
        "red_team": run.red_team,
    }


def plot_names(user: str) -> tuple[str, str, str]:
    """The plots of one principal's run: recall@k per system, calls per toolset, tokens vs success."""
    return f"recall_at_k-{user}.png", f"agent_calls-{user}.png", f"agent_tokens_vs_success-{user}.png"


def write(report: dict[str, Any], reports_dir: Path) -> Path:
    """The report's directory under ``reports_dir``: ``report.json``, ``report.md``, the plots."""
    directory = reports_dir / report["report"]
    directory.mkdir(parents=True, exist_ok=True)
    for stale in [*directory.glob("report.*"), *directory.glob("*.png")]:  # an earlier run's, that day
        stale.unlink()
    (directory / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    plots = {user: [*_plot_recall(report["report"], user, run, directory), *_plot_agents(user, run, directory)] for user, run in report["principals"].items()}
    (directory / "report.md").write_text(markdown(report, plots))
    return directory


def _plot_recall(title: str, user: str, run: dict[str, Any], directory: Path) -> list[str]:
    name = plot_names(user)[0]
    if not run["scored"]:
        return []
    figure = Figure(figsize=(6, 4), layout="tight")
    axes = figure.subplots()
    ks = list(range(1, DEPTH + 1))
    for system, values in run["systems"].items():
        axes.plot(ks, values["recall_curve"], marker="o", label=system)
    axes.set(xlabel="k (pages)", ylabel="page recall@k", ylim=(0, 1.02), xticks=ks, title=f"{title} as {user}")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.savefig(directory / name, dpi=100)
    return [name]


def _plot_agents(user: str, run: dict[str, Any], directory: Path) -> list[str]:
    agents = {name: summary for name, summary in run["agent"].items() if summary.get("questions")}
    if not agents:
        return []
    _, calls_plot, tokens_plot = plot_names(user)
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
    axes.set_title(f"as {user}")
    axes.legend()
    figure.savefig(directory / calls_plot, dpi=100)

    figure = Figure(figsize=(6, 4), layout="tight")
    axes = figure.subplots()
    placed = {name: s for name, s in agents.items() if s["tokens_per_solved"] is not None}
    for name, summary in placed.items():
        axes.scatter([summary["tokens_per_solved"]], [summary["success_rate"]], s=80, label=name)
    widest = max((s["tokens_per_solved"] for s in placed.values()), default=1)
    axes.set(xlabel="tokens per solved question (o200k)", ylabel="share of questions solved", ylim=(0, 1.05), xlim=(0, widest * 1.15), title=f"as {user}")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.savefig(directory / tokens_plot, dpi=100)
    return [calls_plot, tokens_plot]


def markdown(report: dict[str, Any], plots: dict[str, list[str]] | None = None) -> str:
    lines = [
        f"# {report['report']}",
        "",
        f"`{report['dataset']}`, {report['questions']} question(s), as {', '.join(report['principals'])}. "
        "Bracketed: 95% bootstrap interval of the mean over questions.",
        "",
    ]
    judged = report.get("judge_agreement") or {}
    if "correctness" in judged:
        lines += [
            f"The judge ({judged['judge']}) against the hand-labelled sample ({judged['correctness']['n']} answers): "
            f"correctness agreement {judged['correctness']['agreement']} (kappa {judged['correctness']['kappa']}), "
            f"faithfulness agreement {judged['faithful']['agreement']} (kappa {judged['faithful']['kappa']}).",
            "",
        ]
    for user, run in report["principals"].items():
        lines += [f"## As {user}", "", f"{run['scored']} question(s) scored by search, {run['navigation']['questions']} by the navigator.", ""]
        systems = run["systems"]
        if systems:
            names = list(next(iter(systems.values()))["all"])
            lines += ["| system | kind | " + " | ".join(names) + " |", "|---|---|" + "---:|" * len(names)]
            for system, values in systems.items():
                lines.append(f"| {system} | all | " + " | ".join(f"{values['all'][m]:.3f} [{values['ci95'][m][0]:.2f}, {values['ci95'][m][1]:.2f}]" for m in names) + " |")
                for kind, row in values["by_kind"].items():
                    lines.append(f"| {system} | {kind} | " + " | ".join(f"{row[m]:.3f}" for m in names) + " |")
            lines.append("")
        navigation = run["navigation"]
        if "exact" in navigation:
            low, high = navigation["ci95"]
            lines += [f"Navigation exactness ({NAVIGATOR}): **{navigation['exact']:.3f}** [{low:.2f}, {high:.2f}] over {navigation['questions']} question(s).", ""]
        if run["agent"]:
            lines += [
                "The scripted agent (search with the question, open the hits in order until a gold page is open, at most "
                "six calls); tokens are the tool definitions plus every answer read, o200k_base:",
                "",
                "| toolset | " + " | ".join(AGENT_FIELDS) + " |",
                "|---|" + "---:|" * len(AGENT_FIELDS),
                *(f"| {name} | " + " | ".join(str(summary.get(f)) for f in AGENT_FIELDS) + " |" for name, summary in run["agent"].items()),
                "",
            ]
        authorization = run["authorization"]
        if authorization:
            leaked = {system: pages for system, pages in authorization["leaks"].items() if pages}
            lines += [
                f"Authorization: {authorization['visible_pages']} page(s) visible to {user} (leak oracle); "
                + (f"**leaks: {leaked}**" if leaked else "leaks: **0** in every system, the navigator and the agents") + ".",
                "Exposure (share of search questions whose candidates held a page hidden from the principal before authorization): "
                + ", ".join(f"{system} {rate:.3f}" for system, rate in authorization["exposure_rate"].items()) + ".",
                f"Recall@5 against all the gold, hidden pages included: the most a system showing only visible pages can reach is "
                f"{authorization['oracle_recall@5']}; " + ", ".join(f"{system} {value}" for system, value in authorization["recall@5_all_gold"].items()) + ".",
                "",
            ]
            red = authorization["red_team"]
            if red:
                lines += [
                    f"Graph extraction red-team (the whole index): of {red['targets']} entities and relations only pages hidden from {user} support, "
                    f"an attacker starting from their names recovered **{red['recovered']}** in {red['calls']} calls "
                    f"({red['refused']} refused; {red['items_seen']} visible items seen).",
                    "",
                ]
        gemini = run["gemini"]
        if "skipped" in gemini:
            lines += [f"Gemini: {gemini['skipped']}.", ""]
        elif gemini:
            lines += [
                f"Answers composed by Gemini from each system's first pages, graded by the judge ({gemini['judge']}):",
                "",
                "| system | correct | partial | faithful | answer leakage (probes) |",
                "|---|---:|---:|---:|---:|",
                *(
                    f"| {system} | {q['correct']} | {q['partial']} | {q['faithful']} | {q.get('answer_leakage')} ({q.get('leak_probes', 0)}) |"
                    for system, q in gemini["answers"].items()
                ),
                "",
                "The Gemini agent (function calling over each toolset):",
                "",
                "| toolset | solved | success_rate | median_calls_to_gold | tokens_per_solved |",
                "|---|---:|---:|---:|---:|",
                *(f"| {name} | {a['solved']} | {a['success_rate']} | {a['median_calls_to_gold']} | {a['tokens_per_solved']} |" for name, a in gemini["agent"].items()),
                "",
            ]
        for system, ids in run["refused"].items():
            lines += [f"{system} answered {len(ids)} question(s) with an error, scored as no pages: {', '.join(ids)}.", ""]
        for key, text in (("no_visible_gold", f"Skipped, no gold page visible to {user}"), ("not_asked", "Navigation questions without a nav object, not asked")):
            if run[key]:
                lines += [f"{text}: {', '.join(run[key])}.", ""]
        if run["left_out"]:
            lines += [f"Gold pages left out (hidden from {user} or not indexed): {sum(map(len, run['left_out'].values()))} in {len(run['left_out'])} question(s).", ""]
        lines += [f"![{plot}]({plot})" for plot in (plots or {}).get(user, [])]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def show(report: dict[str, Any], console: Console) -> None:
    for user, run in report["principals"].items():
        systems = run["systems"]
        if systems:
            names = list(next(iter(systems.values()))["all"])
            table = Table(title=f"{report['dataset']} — {run['scored']} question(s) as {user}")
            table.add_column("system")
            table.add_column("kind")
            for name in names:
                table.add_column(name, justify="right")
            for system, values in systems.items():
                for kind, row in [("all", values["all"]), *values["by_kind"].items()]:
                    table.add_row(system, kind, *(f"{row[m]:.3f}" for m in names))
            console.print(table)
            console.print("95% bootstrap intervals of each mean: in report.md and report.json")
        navigation = run["navigation"]
        if "exact" in navigation:
            console.print(f"navigation exactness ({NAVIGATOR}): {navigation['exact']:.3f} over {navigation['questions']} question(s)")
        if run["agent"]:
            table = Table(title=f"the scripted agent as {user}, per toolset")
            table.add_column("toolset")
            for name in AGENT_FIELDS:
                table.add_column(name, justify="right")
            for toolset, summary in run["agent"].items():
                table.add_row(toolset, *(str(summary.get(name)) for name in AGENT_FIELDS))
            console.print(table)
        authorization = run["authorization"]
        if authorization:
            leaks = sum(len(pages) for pages in authorization["leaks"].values())
            console.print(f"as {user}: leaks {leaks}; exposure before authorization " + ", ".join(f"{s} {r:.3f}" for s, r in authorization["exposure_rate"].items()))
            if authorization["red_team"]:
                console.print(f"as {user}: the red-team recovered {authorization['red_team']['recovered']} of {authorization['red_team']['targets']} hidden-only items")
        for system, ids in run["refused"].items():
            console.print(f"{system} answered {len(ids)} question(s) with an error, scored as no pages: {', '.join(ids)}")
        if run["not_asked"]:
            console.print(f"not asked (navigation questions without a nav object): {', '.join(run['not_asked'])}")
        if run["no_visible_gold"]:
            console.print(f"skipped, no gold page visible to {user}: {', '.join(run['no_visible_gold'])}")
