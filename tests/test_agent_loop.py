"""The agent loop: every status reachable with scripted policies, compaction, reminders, accounting."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from _fakes import DirSandbox
from ridgeline.agent import AgentLimits, Status, Step, Trajectory, run_agent
from ridgeline.agent.context import ELIDED_PREFIX, ContextTracker, estimate_tokens
from ridgeline.errors import ToolError
from ridgeline.policies import (
    BasePolicy,
    MockPolicy,
    PolicyOutput,
    Usage,
    as_policy,
    call,
    parse_policy_spec,
    turn,
)
from ridgeline.sandbox.base import Sandbox
from ridgeline.tasks import Task, load_task
from ridgeline.tools import FunctionTool, Observation, ToolArgs, ToolContext, default_toolset


@pytest.fixture
def dsb() -> Iterator[DirSandbox]:
    sb = DirSandbox.create()
    yield sb
    sb.close()


def make_task(root: Path, instruction: str = "Write 42 to out.txt.", toml: str = "") -> Task:
    (root / "tests").mkdir(parents=True)
    (root / "solution").mkdir()
    (root / "task.toml").write_text(
        '[task]\nname = "demo"\n[agent]\nmax_steps = 7\ntimeout_sec = 30\n' + toml
    )
    (root / "instruction.md").write_text(instruction)
    (root / "tests/test.sh").write_text('#!/bin/sh\ntest "$(cat /app/out.txt)" = 42\n')
    (root / "solution/solve.sh").write_text("#!/bin/sh\necho 42 > /app/out.txt\n")
    return load_task(root)


def test_ok_episode_records_everything_and_writes_the_answer(dsb: DirSandbox, tmp_path: Path) -> None:
    task = make_task(tmp_path / "t", toml="[ridgeline]\nanswer = true\n")
    policy = MockPolicy(
        [
            turn(call("write_file", path="out.txt", content="42\n"), text="writing"),
            turn(call("bash", command="cat out.txt")),
            turn(call("submit", answer="42")),
        ]
    )
    seen: list[int] = []

    class Rec:
        def on_step(self, trajectory: Trajectory, step: Step) -> None:
            seen.append(step.index)

        def on_end(self, trajectory: Trajectory) -> None:
            seen.append(-1)

    result = run_agent(task, dsb, policy, recorder=Rec())
    assert result.status is Status.OK and result.answer == "42"
    assert dsb.host_path("/logs/agent/answer.txt").read_text() == "42"
    assert (dsb.workdir / "out.txt").read_text() == "42\n"
    t = result.trajectory
    assert [s.kind for s in t.steps] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert [s.index for s in t.steps] == list(range(8))
    assert seen == [*range(8), -1]
    assert "final answer in `answer`" in t.steps[0].content  # the task asks a question
    assert t.steps[1].content == "Write 42 to out.txt."
    assert t.steps[5].observation is not None and t.steps[5].observation.stdout == "42\n"
    assert t.steps[5].observation.exit_code == 0
    assert all(s.model_s is not None for s in t.steps if s.kind == "assistant")
    assert all(s.tool_s is not None for s in t.steps if s.kind == "tool")
    assert t.task == "demo" and t.task_hash == task.hash and t.status is Status.OK and t.answer == "42"
    assert t.limits["max_steps"] == 7 and t.limits["timeout_s"] == 30.0  # from the task's [agent]
    assert t.usage.estimated and t.usage.prompt_tokens > 0  # the mock reports no usage
    assert t.tool_stats.accuracy == 1.0 and t.n_model_calls == 3
    assert t.sandbox["workdir"] == "/app"


def test_policy_start_receives_task_and_sandbox(dsb: DirSandbox, tmp_path: Path) -> None:
    task = make_task(tmp_path / "t")

    class Oracleish(BasePolicy):
        """Shaped like the oracle: it looks at the task and the sandbox before acting."""

        def start(self, task: Task | None, sandbox: Sandbox | None) -> None:
            assert task is not None and sandbox is not None
            self.script = (task.solution_dir / "solve.sh").read_text()

        def act(
            self,
            messages: Sequence[dict[str, Any]],
            tools: Sequence[dict[str, Any]],
            *,
            deadline: float | None = None,
        ) -> PolicyOutput:
            if messages[-1]["role"] == "tool":
                return turn(call("submit"))
            return turn(call("bash", command=self.script.replace("/app/", "")))

    result = run_agent(task, dsb, Oracleish())
    assert result.status is Status.OK and result.answer is None
    assert (dsb.workdir / "out.txt").read_text() == "42\n"


def test_step_limit(dsb: DirSandbox) -> None:
    policy = MockPolicy([turn(call("bash", command="true"))], loop=True)
    result = run_agent("loop forever", dsb, policy, limits=AgentLimits(max_steps=3))
    assert result.status is Status.STEP_LIMIT
    assert result.trajectory.n_model_calls == 3
    assert result.trajectory.error == "step limit of 3 reached without submit"


def test_submit_on_the_last_allowed_step_is_ok(dsb: DirSandbox) -> None:
    policy = MockPolicy([turn(call("bash", command="true")), turn(call("submit"))])
    assert run_agent("x", dsb, policy, limits=AgentLimits(max_steps=2)).status is Status.OK


def test_timeout(dsb: DirSandbox) -> None:
    policy = MockPolicy([turn(call("bash", command="sleep 5"))], loop=True)
    result = run_agent("x", dsb, policy, limits=AgentLimits(timeout_s=0.3))
    assert result.status is Status.TIMEOUT
    obs = result.trajectory.steps[3].observation
    assert obs is not None and obs.timed_out  # the command was cut at the episode deadline


def test_token_budget_uses_reported_usage(dsb: DirSandbox) -> None:
    policy = MockPolicy(
        [turn(call("bash", command="true"), usage=Usage(prompt_tokens=500, completion_tokens=100))], loop=True
    )
    result = run_agent("x", dsb, policy, limits=AgentLimits(token_budget=1000))
    assert result.status is Status.TOKEN_BUDGET
    assert result.trajectory.n_model_calls == 2
    assert result.trajectory.usage.total_tokens == 1200 and not result.trajectory.usage.estimated


def test_context_overflow_when_the_instruction_alone_does_not_fit(dsb: DirSandbox) -> None:
    policy = MockPolicy([turn(call("submit"))])
    result = run_agent("word " * 2000, dsb, policy, limits=AgentLimits(context_tokens=500))
    assert result.status is Status.CONTEXT_OVERFLOW
    assert result.trajectory.n_model_calls == 0
    assert "exceeds the budget of 500" in (result.trajectory.error or "")


def test_compaction_keeps_system_instruction_and_recent_turns(dsb: DirSandbox) -> None:
    big = "python3 -c \"print('x' * 4000)\""
    turns = [turn(call("bash", command=big)) for _ in range(6)] + [turn(call("submit"))]
    policy = MockPolicy(turns)
    tools = default_toolset()
    budget = (
        estimate_tokens([{"role": "user", "content": "x" * 4000}]) * 4
        + estimate_tokens(tools.schemas())
        + 600
    )
    result = run_agent(
        "Print many x.",
        dsb,
        policy,
        tools=tools,
        limits=AgentLimits(context_tokens=budget, keep_recent_turns=2),
    )
    assert result.status is Status.OK
    t = result.trajectory
    assert t.compactions, "the context should have been compacted"
    last_seen = policy.seen[-1]
    assert last_seen[0]["role"] == "system" and last_seen[0]["content"] == t.steps[0].content
    assert last_seen[1] == {"role": "user", "content": "Print many x."}
    tool_msgs = [m for m in last_seen if m["role"] == "tool"]
    assert tool_msgs[0]["content"].startswith(ELIDED_PREFIX)
    assert "characters of bash output" in tool_msgs[0]["content"]
    assert all(m["content"].count("x") >= 4000 for m in tool_msgs[-2:])  # the 2 most recent turns are intact
    assert ContextTracker(tools.schemas()).estimate(last_seen) <= budget
    elided = {i for c in t.compactions for i in c.elided}
    # The trajectory keeps the full observations of elided calls.
    full = [s for s in t.steps if s.kind == "tool" and s.tool_call_id in elided]
    assert full and all(s.observation is not None and "x" * 4000 in s.observation.text for s in full)


def test_text_only_reply_gets_a_reminder_and_the_episode_continues(dsb: DirSandbox) -> None:
    policy = MockPolicy(["I think I am done.", turn(call("submit"))])
    result = run_agent("x", dsb, policy)
    assert result.status is Status.OK
    t = result.trajectory
    reminder = [s for s in t.steps if s.note == "reminder"]
    assert len(reminder) == 1 and "did not call a tool" in reminder[0].content
    assert policy.seen[1][-1]["content"] == reminder[0].content
    assert t.tool_stats.text_only_replies == 1


def test_invalid_output_after_repeated_empty_replies(dsb: DirSandbox) -> None:
    policy = MockPolicy([PolicyOutput()], loop=True)
    result = run_agent("x", dsb, policy, limits=AgentLimits(max_invalid_turns=2))
    assert result.status is Status.INVALID_OUTPUT
    assert result.trajectory.n_model_calls == 3
    assert result.trajectory.tool_stats.empty_replies == 3


def test_invalid_output_after_repeated_malformed_tool_calls(dsb: DirSandbox) -> None:
    policy = MockPolicy([turn(call("bash", '{"command": "ls'))], loop=True)
    result = run_agent("x", dsb, policy, limits=AgentLimits(max_invalid_turns=2))
    assert result.status is Status.INVALID_OUTPUT
    assert result.trajectory.tool_stats.invalid == 3 and result.trajectory.tool_stats.valid == 0
    assert dsb.exec_calls == []


def test_invalid_calls_are_counted_and_shown_to_the_model(dsb: DirSandbox) -> None:
    policy = MockPolicy(
        [
            turn(call("nosuch", {}), call("bash", "{bad json")),
            turn(call("bash", {"command": "echo hi"})),
            turn(call("submit"), call("bash", {"command": "touch never"})),
        ]
    )
    result = run_agent("x", dsb, policy)
    assert result.status is Status.OK
    stats = result.trajectory.tool_stats
    assert (stats.calls, stats.valid, stats.invalid) == (4, 2, 2)
    assert stats.accuracy == 0.5
    first = result.trajectory.steps[2]
    assert [c.valid for c in first.tool_calls] == [False, False]
    assert first.tool_calls[1].arguments == "{bad json" and first.tool_calls[1].parsed is None
    tool_texts = [m["content"] for m in policy.seen[1] if m["role"] == "tool"]
    assert "unknown tool 'nosuch'" in tool_texts[0] and "not valid JSON" in tool_texts[1]
    last = result.trajectory.steps[-2]
    assert last.tool_calls[1].valid is None and "skipped" in (last.tool_calls[1].error or "")
    assert not (dsb.workdir / "never").exists()


def test_agent_error_when_the_script_runs_out(dsb: DirSandbox) -> None:
    result = run_agent("x", dsb, MockPolicy([turn(call("bash", command="true"))]))
    assert result.status is Status.AGENT_ERROR
    assert "exhausted" in (result.trajectory.error or "")


def test_agent_error_when_a_custom_policy_raises(dsb: DirSandbox) -> None:
    def broken(messages: Any, tools: Any) -> PolicyOutput:
        raise KeyError("oops")

    result = run_agent("x", dsb, as_policy(broken))
    assert result.status is Status.AGENT_ERROR
    assert result.trajectory.error == "the policy raised KeyError: 'oops'"


def test_infra_fail_when_the_sandbox_fails(dsb: DirSandbox) -> None:
    dsb.fail_exec = "sandbox vanished"
    result = run_agent("x", dsb, MockPolicy([turn(call("bash", command="ls"))]))
    assert result.status is Status.INFRA_FAIL and result.infra_failed
    assert "sandbox vanished" in (result.trajectory.error or "")


class _Args(ToolArgs):
    pass


def test_infra_fail_when_a_task_tool_crashes(dsb: DirSandbox) -> None:
    def crash(args: _Args, ctx: ToolContext) -> Observation:
        raise ZeroDivisionError("bug in the task's tool")

    def refuse(args: _Args, ctx: ToolContext) -> Observation:
        raise ToolError("not now")

    tools = (
        default_toolset()
        .add(FunctionTool("refuse", "r", _Args, refuse))
        .add(FunctionTool("crash", "c", _Args, crash))
    )
    policy = MockPolicy([turn(call("refuse")), turn(call("crash"))])
    result = run_agent("x", dsb, policy, tools=tools)
    assert result.status is Status.INFRA_FAIL
    assert result.trajectory.steps[3].content == "error: not now"  # ToolError is an observation
    assert result.trajectory.error == "tool 'crash' crashed: ZeroDivisionError: bug in the task's tool"


def test_policy_config_is_recorded_without_secrets(dsb: DirSandbox) -> None:
    cfg = parse_policy_spec("nop")
    result = run_agent("x", dsb, as_policy(cfg), policy_config=cfg)
    assert result.status is Status.OK
    assert result.trajectory.policy == "nop" and result.trajectory.policy_digest == cfg.digest()
    assert result.trajectory.policy_config == {"type": "nop"}


def test_episode_in_the_real_bwrap_sandbox(sb: Sandbox) -> None:
    """The same loop and tools against the real backend (absolute paths, exec bits, /logs/agent)."""
    policy = MockPolicy(
        [
            turn(call("write_file", path="run.sh", content="#!/bin/sh\necho one\n")),
            turn(call("bash", command="chmod +x run.sh && ./run.sh && pwd")),
            turn(call("edit_file", path="/app/run.sh", old_str="one", new_str="two")),
            turn(call("bash", command="./run.sh")),
            turn(call("submit", answer="two")),
        ]
    )
    result = run_agent("Make run.sh print two.", sb, policy, limits=AgentLimits(max_steps=10))
    assert result.status is Status.OK, result.trajectory.error
    outputs = [s.observation for s in result.trajectory.steps if s.kind == "tool"]
    assert outputs[1] is not None and outputs[1].stdout == "one\n/app\n"
    assert outputs[3] is not None and outputs[3].stdout == "two\n"  # still executable after the edit
    assert sb.read_file("/logs/agent/answer.txt") == b"two"
