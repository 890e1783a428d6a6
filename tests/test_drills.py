"""The ``drills-*`` families and the ``quickstart`` suite: determinism, coverage, oracle passes, nop fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ridgeline.eval.trial import run_trial
from ridgeline.policies import parse_policy_spec
from ridgeline.tasks import hash_tree, load_task
from ridgeline.tasks.suites import build_suite, get_suite
from ridgeline.tasks.suites.base import FAMILIES
from ridgeline.tasks.suites.drills import DEMO_FILE, DRILL_FAMILIES, QUICKSTART_DOMAINS

KINDS = [(fam, kind) for fam in DRILL_FAMILIES.values() for kind in FAMILIES[fam]().kinds()]


def test_quickstart_suite_is_registered_and_covers_domains_kinds_levels(tmp_path: Path) -> None:
    suite = get_suite("quickstart")
    assert suite.id == "quickstart-v1"
    assert set(suite.domains) == set(QUICKSTART_DOMAINS)
    paths = build_suite("quickstart", 60, 3, tmp_path / "q")
    tasks = [load_task(p) for p in paths]
    assert {t.domain for t in tasks} == set(QUICKSTART_DOMAINS)
    seen = {(t.spec.metadata["family"], t.spec.metadata["kind"], t.spec.difficulty) for t in tasks}
    assert len(seen) == len(KINDS) * 3  # every kind at every level
    for t in tasks:
        assert t.spec.agent.max_steps <= 4
        calls = json.loads((t.path / DEMO_FILE).read_text())["calls"]
        assert calls[-1]["name"] == "submit"
        assert len(json.dumps(calls)) < 400  # short enough for a tiny policy


def test_same_seed_same_bytes_different_seed_differs(tmp_path: Path) -> None:
    a = build_suite("quickstart", 20, 5, tmp_path / "a")
    b = build_suite("quickstart", 20, 5, tmp_path / "b")
    c = build_suite("quickstart", 20, 6, tmp_path / "c")
    assert [hash_tree(p) for p in a] == [hash_tree(p) for p in b]
    assert {hash_tree(p) for p in a}.isdisjoint({hash_tree(p) for p in c})


def _outcome(task_dir: Path, spec: str, tmp: Path) -> bool | None:
    record = run_trial(load_task(task_dir), parse_policy_spec(spec), tmp)
    passed: bool | None = record["passed"]
    return passed


def _check_kind(family: str, kind: str, level: int, tmp_path: Path) -> None:
    fam = FAMILIES[family]()
    draft = fam.generate(7, 0, level=level, kind=kind)
    from ridgeline.tasks.suites.base import write_task

    task_dir = write_task(draft, tmp_path / "task", fam, 7, 0)
    assert _outcome(task_dir, "oracle", tmp_path / "oracle") is True
    assert _outcome(task_dir, "nop", tmp_path / "nop") is False


@pytest.mark.parametrize(("family", "kind"), KINDS, ids=lambda v: str(v))
def test_oracle_passes_and_nop_fails_per_kind(family: str, kind: str, tmp_path: Path) -> None:
    _check_kind(family, kind, 3, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize(("family", "kind"), KINDS, ids=lambda v: str(v))
def test_oracle_passes_and_nop_fails_every_level(family: str, kind: str, level: int, tmp_path: Path) -> None:
    _check_kind(family, kind, level, tmp_path)


@pytest.mark.slow
def test_oracle_passes_on_a_whole_suite(tmp_path: Path) -> None:
    from ridgeline.eval.runner import run_eval

    tasks = [load_task(p) for p in build_suite("quickstart", 60, 11, tmp_path / "q")]
    data = run_eval(tasks, parse_policy_spec("oracle"), tmp_path / "run", concurrency=4)
    assert data["summary"]["pass_rate"] == 1.0
