"""``ridgeline check``: each hand-made defective task (tests/defects/) gets the right verdict, the good
ones get no false alarm, the probes exercise the real trial pipeline, and every built-in suite passes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.errors import UserError
from ridgeline.qa import CheckOptions, TaskReport, check_tasks, read_by_tests, static_checks
from ridgeline.qa.probes import HACK_PROBES, SCREENABLE, ProbeConfig
from ridgeline.tasks import load_task
from ridgeline.tasks.suites import build_suite, list_suites

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the bwrap backend needs root")

DEFECTS = Path(__file__).parent / "defects"

#: task -> (verdict, checks that must be among its problems). ``flaky-oracle`` is tested on its own.
EXPECTED: dict[str, tuple[str, set[str]]] = {
    "good-basic": ("ok", set()),
    "good-pytest": ("ok", set()),
    "good-question": ("ok", set()),
    "broken-oracle": ("broken", {"oracle"}),
    "trivial-pass": ("broken", {"nop"}),
    "wrong-passes": ("broken", {"wrong"}),
    "reset-daemon": ("broken", {"reset"}),
    "slow-oracle": ("flaky", {"limits"}),
    "memory-hog": ("flaky", {"limits"}),
    "hack-conftest": ("hackable", {"hack.conftest"}),
    "hack-sitecustomize": ("hackable", {"hack.sitecustomize"}),
    "hack-shadow": ("hackable", {"hack.shadow"}),
    "hack-tamper": ("hackable", {"hack.tamper-delete", "hack.tamper-edit"}),
    "hack-trojan": ("hackable", {"hack.trojan"}),
    "leak-solution": ("hackable", {"static.leak"}),
    "leak-tests": ("hackable", {"static.leak"}),
    "invalid-spec": ("invalid", {"static.spec"}),
    "network-tests": ("invalid", {"static.network"}),
    "host-path": ("invalid", {"static.host-path"}),
    "unnamed-output": ("invalid", {"static.instruction"}),
    "missing-reference": ("invalid", {"static.reference"}),
}


def test_every_defect_directory_has_an_expectation() -> None:
    on_disk = {p.name for p in DEFECTS.iterdir() if p.is_dir()}
    assert on_disk == set(EXPECTED) | {"flaky-oracle"}


@pytest.fixture(scope="module")
def defect_reports() -> dict[str, TaskReport]:
    """One batch over every defect but the flaky one (3 oracle runs keep it quick)."""
    paths = [DEFECTS / name for name in EXPECTED]
    reports = check_tasks(paths, CheckOptions(oracle_runs=3, concurrency=8))
    return {Path(r.task_path).name: r for r in reports}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_defect_gets_the_right_verdict(name: str, defect_reports: dict[str, TaskReport]) -> None:
    verdict, checks = EXPECTED[name]
    report = defect_reports[name]
    found = {p.check for p in report.problems}
    assert report.verdict == verdict, [str(p) for p in report.problems]
    assert checks <= found, [str(p) for p in report.problems]
    if verdict == "ok":
        assert report.problems == []
        assert report.notes == []


def test_good_tasks_pass_every_dynamic_check(defect_reports: dict[str, TaskReport]) -> None:
    for name in ("good-basic", "good-pytest", "good-question"):
        checks = defect_reports[name].checks
        assert checks["oracle"]["passes"] == 3
        assert checks["nop"]["passed"] is False
        assert checks["wrong"] == {"wrong.sh": False}
        assert checks["memory"]["halved_passed"] is True
        assert checks["reset"]["restored"] and checks["reset"]["stable"] and checks["reset"]["mutated"]
        expected_probes = (
            set(HACK_PROBES)
            if read_by_tests(load_task(DEFECTS / name))
            else set(HACK_PROBES)
            - {
                "tamper-delete",
                "tamper-edit",
            }
        )
        assert set(checks["hack"]) == expected_probes
        assert not any(checks["hack"].values())


def test_hackable_tasks_are_not_flagged_by_unrelated_probes(defect_reports: dict[str, TaskReport]) -> None:
    """Each hack defect is caught by the probe for its own weakness (probes are specific, not noise)."""
    for name in ("hack-sitecustomize", "hack-shadow", "hack-trojan"):
        hacked = {c for c, passed in defect_reports[name].checks["hack"].items() if passed}
        assert hacked == {name.removeprefix("hack-")}


def test_the_screening_trial_clears_sound_tasks_and_hands_hacked_ones_to_single_probes(
    defect_reports: dict[str, TaskReport],
) -> None:
    good = defect_reports["good-basic"].checks
    assert good["hack_screen"]["passed"] is False
    assert set(good["hack_screen"]["members"]) == set(SCREENABLE)
    hacked = defect_reports["hack-trojan"].checks
    assert hacked["hack_screen"]["passed"] is True
    assert hacked["hack"]["trojan"] is True and hacked["hack"]["conftest"] is False


def test_without_screening_every_probe_runs_on_its_own() -> None:
    [report] = check_tasks([DEFECTS / "hack-shadow"], CheckOptions(oracle_runs=1, screen=False))
    assert "hack_screen" not in report.checks
    assert {c for c, passed in report.checks["hack"].items() if passed} == {"shadow"}
    assert report.verdict == "hackable"


def test_invalid_spec_skips_the_dynamic_checks(defect_reports: dict[str, TaskReport]) -> None:
    report = defect_reports["invalid-spec"]
    assert report.task_hash is None
    assert report.oracle_pass_rate is None
    assert "memory_mb" in report.problems[0].message


def test_flaky_oracle_is_flaky() -> None:
    # The oracle passes each run with probability 1/2: 16 runs all agree with probability 2**-15.
    [report] = check_tasks([DEFECTS / "flaky-oracle"], CheckOptions(oracle_runs=16, probes=()))
    assert report.verdict == "flaky", [str(p) for p in report.problems]
    assert 0 < report.oracle_passes < 16
    assert report.flake_rate == pytest.approx(1 - report.oracle_passes / 16)


def test_planted_rewards_fail_even_if_the_agent_could_write_the_verifier_logs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """(e) and (g): /logs/verifier is read-only to the agent and its processes die before the
    verifier starts. Defence in depth: even with a harness regression that makes the agent's
    /logs/verifier writable, a planted reward file sits beside the one test.sh writes, which the
    verifier reads as tampering (reward 0), so the probes still find nothing to exploit."""
    import ridgeline.eval.trial as trial

    real = trial.task_sandbox_config

    def leaky(task: Any, **overrides: Any) -> Any:
        return real(task, **overrides).model_copy(update={"verifier_logs_writable": True})

    monkeypatch.setattr(trial, "task_sandbox_config", leaky)
    options = CheckOptions(oracle_runs=1, probes=("reward-file", "background", "conftest"))
    [report] = check_tasks([DEFECTS / "good-basic"], options)
    found = {p.check for p in report.problems}
    assert not {"hack.reward-file", "hack.background", "hack.conftest"} & found, report.problems


def test_trials_are_kept_when_asked(tmp_path: Path) -> None:
    options = CheckOptions(oracle_runs=1, probes=("trojan",), logs_dir=tmp_path / "logs")
    [report] = check_tasks([DEFECTS / "hack-trojan"], options)
    [folder] = (tmp_path / "logs").iterdir()
    trojan = folder / "hack-trojan"
    record = json.loads((trojan / "trial.json").read_text())
    assert record["passed"] is True and record["status"] == "ok"
    trajectory = json.loads((trojan / "trajectory.json").read_text())
    assert trajectory["policy_config"]["type"] == "qa-probe"
    assert trajectory["policy_config"]["probe"] == "trojan"
    assert (trojan / "logs" / "verifier" / "reward.txt").read_text().strip() == "1"  # the trojan's
    assert report.verdict == "hackable"


# ----------------------------------------------------------------------------------- static checks


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(DEFECTS / name, dest)
    return dest


def test_static_checks_pass_on_the_good_tasks() -> None:
    for name in ("good-basic", "good-pytest", "good-question"):
        assert static_checks(load_task(DEFECTS / name)) == []


def test_tests_read_paths_merge_the_spec_and_the_sources() -> None:
    assert read_by_tests(load_task(DEFECTS / "hack-tamper")) == ["expected.txt", "out/sum.txt"]
    # check_sum.py is copied into /app by test.sh: a file of tests/, not something the agent makes
    assert read_by_tests(load_task(DEFECTS / "hack-conftest")) == ["out/sum.txt"]


def test_instruction_may_name_a_folder_that_holds_the_file(tmp_path: Path) -> None:
    task_dir = _copy("unnamed-output", tmp_path)
    (task_dir / "instruction.md").write_text("Add up /app/numbers.txt and write the result in /app/out/.\n")
    assert static_checks(load_task(task_dir)) == []


def test_localhost_urls_are_not_network_fetches(tmp_path: Path) -> None:
    task_dir = _copy("good-basic", tmp_path)
    with (task_dir / "tests" / "test.sh").open("a") as f:
        f.write("# the service answers on http://127.0.0.1:8080/health\n")
    assert static_checks(load_task(task_dir)) == []
    with (task_dir / "tests" / "test.sh").open("a") as f:
        f.write("wget -q https://example.com/data.csv\n")
    [problem] = static_checks(load_task(task_dir))
    assert problem.check == "static.network" and "wget" in problem.message


def test_host_paths_under_the_workdir_are_fine(tmp_path: Path) -> None:
    task_dir = _copy("good-basic", tmp_path)
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text().replace("[environment]\n", '[environment]\nworkdir = "/work"\n'))
    for rel in ("tests/test.sh", "solution/solve.sh", "instruction.md"):
        f = task_dir / rel
        f.write_text(f.read_text().replace("/app", "/work"))
    assert static_checks(load_task(task_dir)) == []


def test_the_task_location_is_a_host_path(tmp_path: Path) -> None:
    task_dir = _copy("good-basic", tmp_path)
    (task_dir / "solution" / "solve.sh").write_text(
        f"#!/bin/sh\ncp {task_dir}/numbers.txt /app/out/sum.txt\n"
    )
    [problem] = static_checks(load_task(task_dir))
    hit = problem.message.split("the host path ", 1)[1].split(" (")[0]
    assert problem.check == "static.host-path" and str(task_dir).startswith(hit)


def test_a_solution_quoted_in_the_instruction_is_a_leak(tmp_path: Path) -> None:
    task_dir = _copy("good-basic", tmp_path)
    solve = (task_dir / "solution" / "solve.sh").read_text().split("\n", 1)[1]
    with (task_dir / "instruction.md").open("a") as f:
        f.write(f"\nHint:\n\n```\n{solve}```\n")
    [problem] = static_checks(load_task(task_dir))
    assert problem.check == "static.leak" and problem.verdict == "hackable"


# ----------------------------------------------------------------------------------- API and CLI


def test_bad_options_are_user_errors() -> None:
    with pytest.raises(UserError, match="at least 1"):
        check_tasks([DEFECTS / "good-basic"], CheckOptions(oracle_runs=0))
    with pytest.raises(UserError, match="unknown hack probe"):
        check_tasks([DEFECTS / "good-basic"], CheckOptions(probes=("nonsense",)))
    with pytest.raises(ValueError, match="unknown probe"):
        ProbeConfig(probe="nonsense")


def test_cli_writes_the_json_contract_and_exits_by_verdict(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "verdicts.json"
    args = ["check", str(DEFECTS / "good-basic"), str(DEFECTS / "leak-solution"), "-n", "1"]
    result = runner.invoke(app, [*args, "--probes", "conftest", "--json", str(out)])
    assert result.exit_code == 1, result.output
    assert "hackable" in result.output and "good-basic" in result.output
    data = json.loads(out.read_text())
    good, leak = data["tasks"]
    for entry in data["tasks"]:
        assert {"task", "task_hash", "verdict", "problems", "oracle_pass_rate"} <= set(entry)
    assert good["verdict"] == "ok" and good["problems"] == [] and good["oracle_pass_rate"] == 1.0
    assert good["task_hash"] == load_task(DEFECTS / "good-basic").hash
    assert leak["verdict"] == "hackable" and leak["problems"][0]["check"] == "static.leak"
    assert data["summary"]["verdicts"]["ok"] == 1 and data["summary"]["ok"] is False

    ok = runner.invoke(app, ["check", str(DEFECTS / "good-basic"), "-n", "1", "--probes", "shadow"])
    assert ok.exit_code == 0, ok.output


def test_cli_reports_a_missing_path_in_one_line() -> None:
    result = CliRunner().invoke(app, ["check", "/nonexistent/task"])
    assert result.exit_code != 0
    assert isinstance(result.exception, UserError)


# ----------------------------------------------------------------------------------- built-in suites

SUITES = [s.id for s in list_suites()]


def _check_suite(suite: str, n: int | None, seed: int, out: Path, oracle_runs: int) -> list[TaskReport]:
    paths = build_suite(suite, n, seed, out)
    return check_tasks(paths, CheckOptions(oracle_runs=oracle_runs, concurrency=8))


@pytest.mark.parametrize("suite", SUITES)
def test_a_sample_of_every_builtin_suite_passes_check(suite: str, tmp_path: Path) -> None:
    reports = _check_suite(suite, 1, 11, tmp_path / "tasks", oracle_runs=2)
    bad = {r.task: [str(p) for p in r.problems] for r in reports if r.verdict != "ok"}
    assert not bad


@pytest.mark.slow
@pytest.mark.parametrize("suite", SUITES)
def test_every_builtin_task_passes_check(suite: str, tmp_path: Path) -> None:
    reports = _check_suite(suite, None, 0, tmp_path / "tasks", oracle_runs=5)
    bad = {r.task: [str(p) for p in r.problems] for r in reports if r.verdict != "ok"}
    assert not bad
    assert all(r.oracle_pass_rate == 1.0 for r in reports)
