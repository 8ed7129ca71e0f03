"""Benchmark reports: JSON under ``<data dir>/reports/``, field names kept stable from run to run."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from core.settings import Settings


def write_report(settings: Settings, name: str, report: dict[str, Any]) -> Path:
    path = settings.data_dir / "reports" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def percentiles(values: list[float]) -> tuple[float, float]:
    """p50 and p95 of ``values`` (p95: the value below which 95% of them fall)."""
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
