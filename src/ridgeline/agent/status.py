"""How an episode ended: one typed status per trial.

``ok`` means the agent submitted (the verifier decides whether it was right). The agent failures are
the agent's own doing and score as failed trials. ``infra_fail`` means the sandbox or the model service
failed: such trials are reported apart, excluded from rates and never enter RL group statistics.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    OK = "ok"
    #: The step limit (model calls) was reached without a submit.
    STEP_LIMIT = "step_limit"
    #: The wall-clock limit was reached.
    TIMEOUT = "timeout"
    #: The episode's token budget (prompt + completion over all calls) was spent.
    TOKEN_BUDGET = "token_budget"
    #: The conversation did not fit the context budget even after compaction.
    CONTEXT_OVERFLOW = "context_overflow"
    #: The model kept answering with nothing usable (empty replies, text without tool calls, only
    #: invalid tool calls) beyond the tolerated number of consecutive turns.
    INVALID_OUTPUT = "invalid_output"
    #: The policy raised (a custom policy's bug, an unusable response, an exhausted script).
    AGENT_ERROR = "agent_error"
    #: The sandbox or the model service failed (SandboxError, PolicyServiceError) or a task's own tool
    #: crashed. Never scored as a wrong answer.
    INFRA_FAIL = "infra_fail"

    @property
    def is_infra(self) -> bool:
        return self is Status.INFRA_FAIL

    @property
    def is_agent_failure(self) -> bool:
        return self not in (Status.OK, Status.INFRA_FAIL)
