"""Benchmark reports: JSON under ``<data dir>/reports/``, field names kept stable from run to run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.settings import Settings


def write_report(settings: Settings, name: str, report: dict[str, Any]) -> Path:
    path = settings.data_dir / "reports" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path
