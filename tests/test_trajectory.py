"""Trajectories: JSON round trip, OpenAI-messages export, ATIF export, and replay of a recording."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from _fakes import DirSandbox
from ridgeline.agent import ATIF_VERSION, AgentResult, Status, Trajectory, run_agent
from ridgeline.policies import MockPolicy, PolicyOutput, Usage, build_policy, call, turn


@pytest.fixture
def dsb() -> Iterator[DirSandbox]:
    sb = DirSandbox.create()
    yield sb
    sb.close()


def episode(dsb: DirSandbox) -> AgentResult:
    policy = MockPolicy(
        [
            PolicyOutput(
                text="Let me look.",
                tool_calls=[call("bash", command="echo hello > greeting.txt && cat greeting.txt")],
                usage=Usage(prompt_tokens=120, cached_tokens=20, completion_tokens=15),
                token_ids=[5, 6, 7],
                logprobs=[-0.5, -0.25, -0.125],
                cost_usd=0.001,
                model="test-model",
            ),
            "Hmm.",
            PolicyOutput(
                tool_calls=[call("read_file", "{oops"), call("submit", answer="hello")],
                usage=Usage(prompt_tokens=200, cached_tokens=100, completion_tokens=10),
                cost_usd=0.002,
                model="test-model",
            ),
        ]
    )
    return run_agent("Greet.", dsb, policy)


def test_save_load_round_trip(dsb: DirSandbox, tmp_path: Path) -> None:
    t = episode(dsb).trajectory
    path = t.save(tmp_path / "trial" / "trajectory.json")
    loaded = Trajectory.load(path)
    assert loaded == t
    assert loaded.status is Status.OK
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1 and data["status"] == "ok" and data["answer"] == "hello"
    assert data["steps"][2]["token_ids"] == [5, 6, 7]
    assert not list(path.parent.glob(".*.tmp"))  # atomic write leaves no temp file


def test_openai_messages_export(dsb: DirSandbox) -> None:
    msgs = episode(dsb).trajectory.to_openai_messages()
    assert [m["role"] for m in msgs] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "tool",
    ]
    first = msgs[2]
    assert first["content"] == "Let me look."
    (tc,) = first["tool_calls"]
    assert tc["type"] == "function" and tc["function"]["name"] == "bash"
    assert json.loads(tc["function"]["arguments"]) == {
        "command": "echo hello > greeting.txt && cat greeting.txt"
    }
    assert msgs[3]["tool_call_id"] == tc["id"] and "hello" in msgs[3]["content"]
    last = msgs[6]
    assert last["content"] is None
    assert [c["id"] for c in last["tool_calls"]] == [msgs[7]["tool_call_id"], msgs[8]["tool_call_id"]]
    assert last["tool_calls"][0]["function"]["arguments"] == "{oops"  # what the model really wrote


def test_atif_export(dsb: DirSandbox) -> None:
    t = episode(dsb).trajectory
    atif = t.to_atif()
    assert atif["schema_version"] == ATIF_VERSION == "ATIF-v1.4"
    assert atif["session_id"] == t.id
    assert atif["agent"]["name"] == "ridgeline" and atif["agent"]["version"]
    assert atif["agent"]["model_name"] == "test-model"
    steps = atif["steps"]
    assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
    assert [s["source"] for s in steps] == ["system", "user", "agent", "agent", "user", "agent"]
    agent = steps[2]
    assert agent["message"] == "Let me look." and agent["model_name"] == "test-model"
    (tc,) = agent["tool_calls"]
    assert set(tc) == {"tool_call_id", "function_name", "arguments"}
    assert tc["function_name"] == "bash" and isinstance(tc["arguments"], dict)
    (res,) = agent["observation"]["results"]
    assert res["source_call_id"] == tc["tool_call_id"] and "hello" in res["content"]
    assert agent["metrics"] == {
        "prompt_tokens": 120,
        "completion_tokens": 15,
        "cached_tokens": 20,
        "cost_usd": 0.001,
        "completion_token_ids": [5, 6, 7],
        "logprobs": [-0.5, -0.25, -0.125],
    }
    assert steps[3]["metrics"]["extra"] == {"estimated": True}  # the text-only turn had no usage
    last = steps[5]
    assert [r["source_call_id"] for r in last["observation"]["results"]] == [
        c["tool_call_id"] for c in last["tool_calls"]
    ]
    bad = last["tool_calls"][0]
    assert bad["arguments"] == {} and last["extra"]["raw_arguments"] == {bad["tool_call_id"]: "{oops"}
    fm = atif["final_metrics"]
    assert fm["total_prompt_tokens"] == t.usage.prompt_tokens
    assert fm["total_cached_tokens"] == 120 and fm["total_completion_tokens"] == t.usage.completion_tokens
    assert fm["total_cost_usd"] == pytest.approx(0.003) and fm["total_steps"] == len(steps)
    assert atif["extra"]["status"] == "ok" and atif["extra"]["task"] == "adhoc"
    json.dumps(atif)


def test_replay_reproduces_a_recorded_episode(dsb: DirSandbox, tmp_path: Path) -> None:
    original = episode(dsb).trajectory
    path = original.save(tmp_path / "t.json")
    original.save_atif(tmp_path / "atif.json")
    for source in (path, tmp_path / "atif.json"):
        sb = DirSandbox.create()
        try:
            replayed = run_agent("Greet.", sb, build_policy(f"replay:{source}"))
            assert (sb.workdir / "greeting.txt").read_text() == "hello\n"
        finally:
            sb.close()
        assert replayed.status is Status.OK and replayed.answer == "hello"
        assert [s.kind for s in replayed.trajectory.steps] == [s.kind for s in original.steps]
        assert replayed.trajectory.tool_stats == original.tool_stats


def test_mock_turn_helper_and_usage_totals(dsb: DirSandbox) -> None:
    policy = MockPolicy([turn(call("submit"), usage=Usage(prompt_tokens=10, completion_tokens=2))])
    t = run_agent("x", dsb, policy).trajectory
    assert (t.usage.prompt_tokens, t.usage.completion_tokens, t.usage.estimated) == (10, 2, False)
