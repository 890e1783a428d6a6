"""The ``oracle`` policy: runs the task's reference solution, then submits.

The trial runner mounts ``solution/`` read-only at ``/solution`` for policies whose
``needs_solution`` is True (only this one), so the solution never reaches any other agent. The
oracle goes through the same agent loop and tools as a model, so an oracle run measures the harness
exactly as a model run would use it. A question task's ``solve.sh`` writes its own answer to
``/logs/agent/answer.txt``; the oracle then submits without an answer, which leaves that file alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from ridgeline.policies.base import BasePolicy, Message, PolicyOutput, ToolCall, ToolSchema
from ridgeline.policies.spec import PolicyConfig, register_policy

if TYPE_CHECKING:
    from ridgeline.sandbox.base import Sandbox
    from ridgeline.tasks.loader import Task

SOLUTION_MOUNT = "/solution"


class OracleConfig(PolicyConfig):
    """Runs ``solution/solve.sh``."""

    type: Literal["oracle"] = "oracle"


class OraclePolicy(BasePolicy):
    """Turn 1: ``bash /solution/solve.sh`` (with the task's agent timeout); turn 2: ``submit``."""

    needs_solution = True

    def __init__(self) -> None:
        self._turn = 0
        self._timeout = 600.0

    def start(self, task: Task | None, sandbox: Sandbox | None) -> None:
        self._turn = 0
        if task is not None:
            self._timeout = task.spec.agent.timeout_sec

    def act(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> PolicyOutput:
        self._turn += 1
        if self._turn == 1:
            command = f"bash {SOLUTION_MOUNT}/solve.sh"
            return PolicyOutput(
                tool_calls=[
                    ToolCall.from_raw("oracle_1", "bash", {"command": command, "timeout": self._timeout})
                ]
            )
        return PolicyOutput(tool_calls=[ToolCall.from_raw(f"oracle_{self._turn}", "submit", {})])


@register_policy("oracle", OracleConfig)
def build_oracle(config: OracleConfig) -> OraclePolicy:
    return OraclePolicy()
