"""The ``mock`` policy: deterministic scripted outputs, used by tests everywhere.

Each :meth:`MockPolicy.act` returns the next scripted turn; :meth:`MockPolicy.start` rewinds the
script, so one policy object replays the same script in every episode. When the script runs out the
policy raises :class:`~ridgeline.errors.PolicyError` (or starts over with ``loop=True``).

Example::

    policy = MockPolicy([
        turn(call("bash", command="echo hi > out.txt")),
        turn(call("submit", answer="42")),
    ])
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ridgeline.errors import PolicyError
from ridgeline.policies.base import BasePolicy, Message, PolicyOutput, ToolCall, ToolSchema, Usage
from ridgeline.policies.spec import MockConfig, ScriptedTurn, register_policy

if TYPE_CHECKING:
    from ridgeline.sandbox.base import Sandbox
    from ridgeline.tasks.loader import Task


def call(name: str, arguments: str | dict[str, Any] | None = None, /, **kwargs: Any) -> ToolCall:
    """A scripted tool call; ``arguments`` may be raw (possibly invalid) JSON text. The id is filled
    in by the policy when left empty."""
    if arguments is not None and kwargs:
        raise ValueError("pass either raw arguments or keyword arguments, not both")
    return ToolCall.from_raw("", name, arguments if arguments is not None else kwargs)


def turn(*calls: ToolCall, text: str = "", usage: Usage | None = None) -> PolicyOutput:
    """A scripted assistant turn with the given tool calls."""
    return PolicyOutput(text=text, tool_calls=list(calls), usage=usage)


def _from_scripted(t: ScriptedTurn) -> PolicyOutput:
    calls = [ToolCall.from_raw(c.id or "", c.name, c.arguments) for c in t.tool_calls]
    return PolicyOutput(text=t.text, tool_calls=calls, usage=t.usage)


class MockPolicy(BasePolicy):
    """Returns scripted turns in order. Strings stand for text-only turns."""

    def __init__(self, outputs: Iterable[PolicyOutput | ScriptedTurn | str], *, loop: bool = False) -> None:
        self._outputs: list[PolicyOutput] = []
        for o in outputs:
            if isinstance(o, str):
                o = PolicyOutput(text=o)
            elif isinstance(o, ScriptedTurn):
                o = _from_scripted(o)
            self._outputs.append(o)
        self.loop = loop
        self._cursor = 0
        self._calls = 0
        self._lock = threading.Lock()
        #: Every conversation the policy was shown, for assertions in tests.
        self.seen: list[list[Message]] = []

    @property
    def remaining(self) -> int:
        return len(self._outputs) - self._cursor

    def start(self, task: Task | None, sandbox: Sandbox | None) -> None:
        with self._lock:
            self._cursor = 0

    def act(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> PolicyOutput:
        with self._lock:
            self.seen.append([dict(m) for m in messages])
            if self._cursor >= len(self._outputs):
                if not (self.loop and self._outputs):
                    raise PolicyError(f"the mock script is exhausted after {len(self._outputs)} turns")
                self._cursor = 0
            out = self._outputs[self._cursor]
            self._cursor += 1
            self._calls += 1
            n = self._calls
        if any(not c.id for c in out.tool_calls):
            calls = [
                c if c.id else c.model_copy(update={"id": f"call_{n}_{i}"})
                for i, c in enumerate(out.tool_calls)
            ]
            out = out.model_copy(update={"tool_calls": calls})
        return out


@register_policy("mock", MockConfig)
def build_mock(config: MockConfig) -> MockPolicy:
    return MockPolicy(config.load_turns(), loop=config.loop)
