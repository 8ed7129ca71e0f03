"""The OpenFGA model: its own tests pass in the real engine (fga CLI), they fail for the widening
model they were written against, and the shipped JSON is the DSL."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from authz.client import load_model

AUTHZ = Path(__file__).resolve().parents[2] / "authz"
FGA = str(Path(sys.executable).parent / "fga")
SAFE_GUARD = "define passes_guard: (unguarded but not has_guard) or passes_restrictions from guard"
SAFE_PARENT = "define passes_parent: (own_visibility but not has_parent) or viewer from parent"
SUITES = ["model.fga.yaml", "model_jira.fga.yaml"]


def model_test(tests: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FGA, "model", "test", "--tests", str(tests)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("suite", SUITES)
def test_model_tests_pass_in_the_engine(suite):
    count = len(yaml.safe_load((AUTHZ / suite).read_text())["tests"])
    run = model_test(AUTHZ / suite)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Tests {count}/{count} passing" in run.stdout + run.stderr


@pytest.mark.parametrize(
    ("suite", "safe", "widening"),
    [
        # v0's `is_root or viewer from parent`: a page with both the marker and a guard escapes the guard
        ("model.fga.yaml", SAFE_GUARD, "define passes_guard: unguarded or passes_restrictions from guard"),
        # the same for an issue with both the own-visibility marker and a parent
        ("model_jira.fga.yaml", SAFE_PARENT, "define passes_parent: own_visibility or viewer from parent"),
    ],
)
def test_model_tests_catch_a_marker_that_widens(tmp_path, suite, safe, widening):
    """A plain union lets an object with both markers escape its parent's rule; the suite must
    reject that model."""
    model = (AUTHZ / "model.fga").read_text()
    assert safe in model
    (tmp_path / "model.fga").write_text(model.replace(safe, widening))
    shutil.copy(AUTHZ / suite, tmp_path / suite)
    run = model_test(tmp_path / suite)
    assert run.returncode != 0
    assert "never widens" in run.stdout + run.stderr


def test_shipped_json_is_the_transformed_dsl():
    run = subprocess.run(
        [FGA, "model", "transform", "--file", str(AUTHZ / "model.fga"), "--output-format", "json"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    assert json.loads(run.stdout) == load_model()


def test_models_compare_by_rules_and_type_restrictions_not_by_spelling_noise():
    from authz.client import _same_model

    shipped = load_model()
    noisy = json.loads(json.dumps(shipped))
    for definition in noisy["type_definitions"]:
        definition.setdefault("metadata", {})["source_info"] = None
        definition["metadata"]["module"] = ""
    for condition in noisy["conditions"].values():
        for parameter in condition["parameters"].values():
            parameter["generic_types"] = []
    assert _same_model(noisy, shipped)
    narrower = json.loads(json.dumps(shipped))
    space = next(d for d in narrower["type_definitions"] if d["type"] == "space")
    space["metadata"]["relations"]["viewer"]["directly_related_user_types"].pop(1)  # drop user:*
    assert not _same_model(narrower, shipped)
