"""``ridgeline filter``: trajectories of real and synthetic runs → SFT JSONL, every drop reason counted."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from _cli import run_cli
from ridgeline.agent.status import Status
from ridgeline.agent.trajectory import Compaction, ObservationRecord, RecordedToolCall, Step, Trajectory
from ridgeline.errors import UserError
from ridgeline.qa.filter import DROP_REASONS, call_signature, filter_runs, protected_mentions
from ridgeline.tools import default_toolset

needs_sandbox = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0, reason="the bwrap backend needs bubblewrap and root"
)
BUILTIN_TOOLS = ["bash", "read_file", "write_file", "edit_file", "submit"]


# -- synthetic runs ---------------------------------------------------------------------------------


def make_traj(
    task: str,
    calls: list[tuple[str, dict[str, Any]]],
    *,
    status: Status = Status.OK,
    reward: float | None = 1.0,
    task_hash: str | None = None,
    compacted: bool = False,
    extra_calls_after_submit: int = 0,
) -> Trajectory:
    """A trajectory with one assistant step per call, each answered by a tool step."""
    steps = [Step(index=0, kind="system", content="system prompt"), Step(index=1, kind="user", content=task)]
    for i, (name, args) in enumerate(calls):
        cid = f"c{i}"
        recorded = [RecordedToolCall(id=cid, name=name, arguments=json.dumps(args), parsed=args, valid=True)]
        if i == len(calls) - 1:
            recorded += [
                RecordedToolCall(id=f"skip{j}", name="bash", arguments='{"command": "ls"}', valid=None)
                for j in range(extra_calls_after_submit)
            ]
        steps.append(Step(index=len(steps), kind="assistant", tool_calls=recorded))
        obs = ObservationRecord(text=f"output {i}")
        steps.append(Step(index=len(steps), kind="tool", tool_call_id=cid, name=name, observation=obs))
    return Trajectory(
        task=task,
        task_hash=task_hash or f"sha256:{task}",
        domain="terminal",
        policy="mock",
        policy_digest="sha256:policy",
        sandbox={"workdir": "/app"},
        tools=BUILTIN_TOOLS,
        status=status,
        reward=reward,
        steps=steps,
        compactions=[Compaction(step=3, elided=["c0"], tokens_before=100, tokens_after=10)]
        if compacted
        else [],
    )


def write_run(root: Path, trajs: list[Trajectory | None]) -> Path:
    """A run directory in the runner's layout; None stands for a trial whose trajectory is missing."""
    trials = []
    for i, t in enumerate(trajs):
        rel = f"trials/t{i}/0/trajectory.json"
        if t is not None:
            t.save(root / rel)
        trials.append(
            {
                "task": t.task if t else f"lost-{i}",
                "task_hash": t.task_hash if t else "sha256:lost",
                "attempt": 0,
                "status": str(t.status) if t else "infra_fail",
                "reward": t.reward if t else None,
                "trajectory": rel,
            }
        )
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(json.dumps({"summary": {}, "trials": trials}))
    return root


SOLVE = [("bash", {"command": "echo hi > /app/out.txt"}), ("submit", {})]


@pytest.fixture
def synthetic_run(tmp_path: Path) -> Path:
    return write_run(
        tmp_path / "run",
        [
            make_traj("a-kept", SOLVE, extra_calls_after_submit=1),
            # the same calls up to whitespace on the same task: a duplicate
            make_traj("a-kept", [("bash", {"command": "echo  hi >   /app/out.txt"}), ("submit", {})]),
            # the same calls on another task: not a duplicate
            make_traj("b-kept", SOLVE),
            make_traj("c-infra", SOLVE, status=Status.INFRA_FAIL, reward=None),
            make_traj("d-agent-error", SOLVE, status=Status.AGENT_ERROR, reward=None),
            make_traj("e-peek", [("bash", {"command": "cat /tests/test.sh"}), ("submit", {})]),
            make_traj(
                "f-reward", [("bash", {"command": "echo 1 > /logs/verifier/reward.txt"}), ("submit", {})]
            ),
            make_traj("g-relative", [("read_file", {"path": "../solution/solve.sh"}), ("submit", {})]),
            make_traj("h-steps", SOLVE[:1], status=Status.STEP_LIMIT, reward=0.0),
            make_traj("i-compacted", SOLVE, compacted=True),
            make_traj("j-failed", SOLVE, reward=0.0),
            make_traj("k-timeout", SOLVE[:1], status=Status.TIMEOUT, reward=0.0),
            None,
        ],
    )


def _manifest(out: Path) -> dict[str, Any]:
    return json.loads((out / "manifest.json").read_text())  # type: ignore[no-any-return]


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "sft.jsonl").read_text().splitlines()]


def test_each_drop_reason_is_counted(synthetic_run: Path, tmp_path: Path) -> None:
    report = filter_runs([synthetic_run], tmp_path / "ds")
    m = _manifest(tmp_path / "ds")
    assert m["n_input"] == 13 and m["n_kept"] == 2 == report.kept
    assert m["dropped"] == {
        "unreadable": 1,
        "infra_fail": 1,
        "agent_error": 1,
        "touched_protected": 3,
        "truncated": 3,
        "failed": 1,
        "duplicate": 1,
    }
    assert list(m["dropped"]) == list(DROP_REASONS)
    by_task = {d["task"]: d["reason"] for d in m["dropped_trajectories"]}
    assert by_task["e-peek"] == by_task["f-reward"] == by_task["g-relative"] == "touched_protected"
    assert by_task["h-steps"] == by_task["i-compacted"] == by_task["k-timeout"] == "truncated"
    assert [r["metadata"]["task"] for r in _records(tmp_path / "ds")] == ["a-kept", "b-kept"]


def test_keep_failed_keeps_low_reward_but_not_truncated(synthetic_run: Path, tmp_path: Path) -> None:
    filter_runs([synthetic_run], tmp_path / "ds", keep_failed=True)
    m = _manifest(tmp_path / "ds")
    assert m["dropped"]["failed"] == 0 and m["dropped"]["truncated"] == 3
    assert "j-failed" in [r["metadata"]["task"] for r in _records(tmp_path / "ds")]


def test_sft_records_are_valid_chat_data(synthetic_run: Path, tmp_path: Path) -> None:
    filter_runs([synthetic_run], tmp_path / "ds")
    rec = _records(tmp_path / "ds")[0]
    assert set(rec) == {"messages", "tools", "metadata"}
    meta = rec["metadata"]
    assert {"task", "task_hash", "domain", "reward", "policy_digest"} <= set(meta)
    assert meta["reward"] == 1.0 and meta["task_hash"] == "sha256:a-kept" and meta["domain"] == "terminal"
    roles = [m["role"] for m in rec["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
    # every tool call is answered by a tool message; the call skipped after submit is left out
    calls = [c["id"] for m in rec["messages"] for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in rec["messages"] if m["role"] == "tool"]
    assert calls == answered == ["c0", "c1"]
    assert rec["messages"][2]["tool_calls"][0]["function"] == {
        "name": "bash",
        "arguments": json.dumps({"command": "echo hi > /app/out.txt"}),
    }
    schemas = {s["function"]["name"]: s for s in default_toolset().schemas()}
    assert rec["tools"] == [schemas[n] for n in BUILTIN_TOOLS]


def test_task_tools_without_schema_are_counted(tmp_path: Path) -> None:
    t = make_traj("render", SOLVE)
    t.tools = [*BUILTIN_TOOLS, "render"]
    u = make_traj("render2", SOLVE)
    u.tools = [*BUILTIN_TOOLS, "render"]
    schema = {"type": "function", "function": {"name": "render", "parameters": {"type": "object"}}}
    u.metadata["tool_schemas"] = [schema]
    report = filter_runs([write_run(tmp_path / "run", [t, u])], tmp_path / "ds")
    assert report.tools_without_schema == {"render": 1}
    tools = [r["tools"][-1] for r in _records(tmp_path / "ds")]
    assert tools[0]["function"]["name"] == "render" and tools[1] == schema


@pytest.mark.parametrize(
    ("call", "hit"),
    [
        (("bash", {"command": "cat /tests/test.sh"}), True),
        (("bash", {"command": "ls /tests"}), True),
        (("bash", {"command": "python3 x.py; cat reward.json"}), True),
        (("bash", {"command": "bash /solution/solve.sh"}), True),
        (("read_file", {"path": "/logs/verifier/test-stdout.txt"}), True),
        (("write_file", {"path": "../../logs/verifier/x", "content": "1"}), True),
        (("edit_file", {"path": "../tests/test_outputs.py", "old": "a", "new": "b"}), True),
        # the agent's own tests and look-alike names are fine
        (("bash", {"command": "cd /app/proj && python3 -m pytest -q tests"}), False),
        (("read_file", {"path": "/app/tests/test_x.py"}), False),
        (("read_file", {"path": "tests/test_x.py"}), False),
        (("bash", {"command": "ls /testsuite /solutions_dir"}), False),
        (("write_file", {"path": "/logs/agent/answer.txt", "content": "42"}), False),
    ],
)
def test_protected_mentions(call: tuple[str, dict[str, Any]], hit: bool) -> None:
    assert bool(protected_mentions(make_traj("t", [call]))) is hit


def test_call_signature_normalises_whitespace_nulls_and_key_order() -> None:
    a = make_traj("t", [("bash", {"command": "ls  -l", "timeout": None}), ("submit", {})])
    b = make_traj("t", [("bash", {"command": " ls -l"}), ("submit", {})])
    c = make_traj("t", [("bash", {"command": "ls -la"}), ("submit", {})])
    assert call_signature(a) == call_signature(b) != call_signature(c)


def test_output_is_deterministic(synthetic_run: Path, tmp_path: Path) -> None:
    filter_runs([synthetic_run], tmp_path / "one")
    filter_runs([synthetic_run], tmp_path / "two")
    for name in ("sft.jsonl", "manifest.json"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_interrupted_run_without_results_is_read_from_trial_files(tmp_path: Path) -> None:
    run = tmp_path / "run"
    t = make_traj("a", SOLVE)
    t.save(run / "trials" / "a__x" / "0" / "trajectory.json")
    (run / "trials" / "a__x" / "0" / "trial.json").write_text(json.dumps({"task": "a", "attempt": 0}))
    assert filter_runs([run], tmp_path / "ds").kept == 1


def test_user_errors(synthetic_run: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is not a directory"):
        filter_runs([tmp_path / "missing"], tmp_path / "ds")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a run directory"):
        filter_runs([tmp_path / "empty"], tmp_path / "ds")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("x")
    with pytest.raises(UserError, match="not empty"):
        filter_runs([synthetic_run], tmp_path / "busy")
    filter_runs([synthetic_run], tmp_path / "busy", force=True)
    assert (tmp_path / "busy" / "keep.txt").exists() and (tmp_path / "busy" / "sft.jsonl").exists()


def test_cli_prints_table_and_one_line_errors(
    synthetic_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_cli(["filter", str(synthetic_run), "--out", str(tmp_path / "ds")], monkeypatch, capsys)
    assert code == 0
    assert "touched_protected" in out and "duplicate" in out and "sft.jsonl" in out
    code, out = run_cli(["filter", str(tmp_path / "nope"), "--out", str(tmp_path / "x")], monkeypatch, capsys)
    assert code == 1
    assert out.strip().startswith("error:") and len(out.strip().splitlines()) == 1


# -- a real run -------------------------------------------------------------------------------------


@needs_sandbox
def test_filter_real_runs(tmp_path: Path) -> None:
    """Oracle runs touch /solution, nop runs fail, a scripted solver is kept once (its rerun is a
    duplicate)."""
    from ridgeline.eval.runner import run_eval
    from ridgeline.policies import parse_policy_spec
    from ridgeline.policies.spec import MockConfig
    from ridgeline.tasks import load_task
    from ridgeline.tasks.scaffold import scaffold_task
    from ridgeline.tasks.suites import build_suite

    starter = [load_task(p) for p in build_suite("starter", 3, 1, tmp_path / "tasks")]
    greet = load_task(scaffold_task("greet", tmp_path / "own"))
    solver = MockConfig.model_validate(
        {
            "outputs": [
                {
                    "tool_calls": [
                        {"name": "bash", "arguments": {"command": "echo 'hello, greet' > greeting.txt"}}
                    ]
                },
                {"tool_calls": [{"name": "submit", "arguments": {}}]},
            ]
        }
    )
    runs = tmp_path / "runs"
    oracle = run_eval([*starter, greet], parse_policy_spec("oracle"), runs / "oracle", concurrency=4)
    nop = run_eval(starter, parse_policy_spec("nop"), runs / "nop", concurrency=4)
    run_eval([greet], solver, runs / "solver-1")
    run_eval([greet], solver, runs / "solver-2")
    assert oracle["summary"]["n_trials"] == 4 and nop["summary"]["n_trials"] == 3

    names = ["oracle", "nop", "solver-1", "solver-2"]
    report = filter_runs([runs / n for n in names], tmp_path / "ds")
    # What each trial should come to, from its real outcome (a loaded machine can fail a sandbox).
    expected: Counter[str] = Counter()
    solved = []
    for name in names:
        for rec in json.loads((runs / name / "results.json").read_text())["trials"]:
            if rec["status"] == "infra_fail":
                expected["infra_fail"] += 1
            elif name == "oracle":
                expected["touched_protected"] += 1
            elif name == "nop":
                expected["failed"] += 1
            else:
                assert rec["passed"] is True
                solved.append(name)
    expected["duplicate"] += max(0, len(solved) - 1)
    assert report.n_input == 4 + 3 + 2
    assert report.dropped == +expected
    assert report.kept == min(1, len(solved))
    if solved:
        (rec,) = _records(tmp_path / "ds")
        assert rec["metadata"]["task"] == "greet" and rec["metadata"]["reward"] == 1.0
        assert rec["metadata"]["task_hash"] == greet.hash
        roles = [m["role"] for m in rec["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]

    kept_failed = filter_runs([runs / "nop"], tmp_path / "ds-failed", keep_failed=True)
    assert kept_failed.kept == 3 - kept_failed.dropped["infra_fail"]
