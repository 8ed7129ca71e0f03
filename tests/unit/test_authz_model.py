"""The OpenFGA model: its own tests pass in the real engine (fga CLI), and the shipped JSON is the DSL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from authz.client import load_model

AUTHZ = Path(__file__).resolve().parents[2] / "authz"
FGA = str(Path(sys.executable).parent / "fga")


def test_model_tests_pass_in_the_engine():
    run = subprocess.run(
        [FGA, "model", "test", "--tests", str(AUTHZ / "model.fga.yaml")], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Tests 8/8 passing" in run.stdout + run.stderr


def test_shipped_json_is_the_transformed_dsl():
    run = subprocess.run(
        [FGA, "model", "transform", "--file", str(AUTHZ / "model.fga"), "--output-format", "json"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    assert json.loads(run.stdout) == load_model()
