"""The Policy interface: anything that picks the next action.

A policy is given the conversation so far (OpenAI-style chat messages) and the tool schemas, and
returns a :class:`PolicyOutput`: assistant text, tool calls, token usage and, when it has them, the
generated token ids and log-probs. Two optional lifecycle hooks let a policy see the trial it acts in:

* :meth:`Policy.start` is called once per episode, before the first :meth:`Policy.act`, with the task
  and the trial's sandbox. The ``oracle`` policy uses it to find and stage the reference solution;
  scripted policies use it to rewind their script.
* :meth:`Policy.close` releases resources (HTTP clients, engines). The owner of the policy calls it.

A policy may keep per-episode state, so build one per trial (``build_policy`` is cheap).

Failures are attributed to a boundary:

* :class:`~ridgeline.errors.PolicyServiceError` — the model service failed (after retries): the trial
  ends with ``infra_fail`` and is never scored as a wrong answer.
* :class:`~ridgeline.errors.PolicyError` — the policy produced something unusable or a custom policy
  raised: ``agent_error``. Its subclasses :class:`ContextLengthExceeded` (``context_overflow``) and
  :class:`PolicyDeadlineExceeded` (``timeout``) carry a more precise status.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ridgeline.errors import PolicyError

if TYPE_CHECKING:
    from ridgeline.sandbox.base import Sandbox
    from ridgeline.tasks.loader import Task

#: One OpenAI-style chat message (``{"role": ..., "content": ..., "tool_calls": ...}``).
Message = dict[str, Any]
#: One OpenAI function-calling tool schema.
ToolSchema = dict[str, Any]


class ContextLengthExceeded(PolicyError):
    """The model rejected the request because the conversation is longer than its context window."""


class PolicyDeadlineExceeded(PolicyError):
    """The episode's wall-clock deadline passed while the policy was thinking."""


class Usage(BaseModel):
    """Token usage. ``prompt_tokens`` counts all input tokens; ``cached_tokens`` is the cached subset."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    #: True when any part was estimated from characters (len/4) rather than reported by the policy.
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            estimated=self.estimated or other.estimated,
        )


class ToolCall(BaseModel):
    """One tool call as the model wrote it: ``arguments`` is the raw JSON text, ``parsed`` its parse
    (None, with ``parse_error`` set, when the text is not a JSON object)."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"
    parsed: dict[str, Any] | None = None
    parse_error: str | None = None

    @classmethod
    def from_raw(cls, id: str, name: str, arguments: str | dict[str, Any] | None) -> ToolCall:
        """Build a call from raw arguments (JSON text, or an object that is serialised)."""
        if arguments is None:
            arguments = "{}"
        if isinstance(arguments, dict):
            return cls(id=id, name=name, arguments=json.dumps(arguments), parsed=arguments)
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return cls(id=id, name=name, arguments=arguments, parse_error=f"not valid JSON: {exc}")
        if not isinstance(value, dict):
            return cls(
                id=id,
                name=name,
                arguments=arguments,
                parse_error=f"expected a JSON object, got {type(value).__name__}",
            )
        return cls(id=id, name=name, arguments=arguments, parsed=value)

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


class PolicyOutput(BaseModel):
    """One assistant turn."""

    model_config = ConfigDict(frozen=True)

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    #: None when the policy does not report usage (the loop then estimates it).
    usage: Usage | None = None
    #: Ids of the generated tokens and their log-probs, when the policy provides them.
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    #: Ids of the prompt tokens, when the policy provides them.
    prompt_token_ids: list[int] | None = None
    cost_usd: float = 0.0
    #: False when the model has no entry in the price table (``cost_usd`` is then 0).
    priced: bool = True
    model: str | None = None
    finish_reason: str | None = None
    #: Separate reasoning text, when the server returns it (``reasoning_content``).
    reasoning: str | None = None

    def to_message(self) -> Message:
        """The assistant message to append to the conversation."""
        msg: Message = {"role": "assistant", "content": self.text or (None if self.tool_calls else "")}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        return msg


@runtime_checkable
class Policy(Protocol):
    """Anything that picks the next action. See the module docstring for the lifecycle."""

    def start(self, task: Task | None, sandbox: Sandbox | None) -> None:
        """Called once per episode before the first :meth:`act` (``None`` outside a trial)."""

    def act(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> PolicyOutput:
        """Return the next assistant turn for ``messages`` given the available ``tools``.

        ``deadline`` is the episode's end as a ``time.monotonic()`` value (None = unlimited); a policy
        that waits on a service should not wait past it.

        Raises:
            PolicyServiceError: the model service failed (infrastructure).
            PolicyError: the policy cannot produce a usable turn.
        """
        ...

    def close(self) -> None:
        """Release resources. Idempotent."""


class BasePolicy(abc.ABC):
    """Convenience base class with no-op :meth:`start` and :meth:`close`; subclasses implement act."""

    def start(self, task: Task | None, sandbox: Sandbox | None) -> None:
        return None

    @abc.abstractmethod
    def act(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> PolicyOutput:
        """See :meth:`Policy.act`."""

    def close(self) -> None:
        return None
