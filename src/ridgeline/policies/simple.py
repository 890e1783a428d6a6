"""Simple policies: ``nop`` (submits at once), ``replay`` (a recorded trajectory's turns again) and
``callable`` (any Python function or Policy class), plus :func:`as_policy` to adapt Python objects."""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ridgeline.errors import ConfigError, PolicyError
from ridgeline.policies.base import BasePolicy, Message, Policy, PolicyOutput, ToolCall, ToolSchema
from ridgeline.policies.spec import (
    CallableConfig,
    NopConfig,
    PolicyConfig,
    ReplayConfig,
    build_policy,
    register_policy,
)

if TYPE_CHECKING:
    from ridgeline.sandbox.base import Sandbox
    from ridgeline.tasks.loader import Task

#: A function policy: ``fn(messages, tools)`` returning a PolicyOutput, a string (text) or a dict.
PolicyFn = Callable[[Sequence[Message], Sequence[ToolSchema]], "PolicyOutput | str | dict[str, Any]"]


class NopPolicy(BasePolicy):
    """Does nothing and submits (no answer). A task that this policy passes is broken."""

    def act(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> PolicyOutput:
        return PolicyOutput(tool_calls=[ToolCall.from_raw("call_nop", "submit", {})])


def _turns_from_ridgeline(steps: list[Any]) -> list[PolicyOutput]:
    out = []
    for s in steps:
        if not isinstance(s, dict) or s.get("kind") != "assistant":
            continue
        calls = [
            ToolCall.from_raw(str(c.get("id", "")), str(c.get("name", "")), c.get("arguments", "{}"))
            for c in s.get("tool_calls") or []
        ]
        out.append(
            PolicyOutput(
                text=s.get("content") or "",
                tool_calls=calls,
                token_ids=s.get("token_ids"),
                logprobs=s.get("logprobs"),
            )
        )
    return out


def _turns_from_atif(steps: list[Any]) -> list[PolicyOutput]:
    out = []
    for s in steps:
        if not isinstance(s, dict) or s.get("source") != "agent":
            continue
        calls = [
            ToolCall.from_raw(
                str(c.get("tool_call_id", "")), str(c.get("function_name", "")), c.get("arguments")
            )
            for c in s.get("tool_calls") or []
        ]
        out.append(PolicyOutput(text=s.get("message") or "", tool_calls=calls))
    return out


def _turns_from_messages(messages: list[Any]) -> list[PolicyOutput]:
    out = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        calls = []
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            calls.append(
                ToolCall.from_raw(str(c.get("id", "")), str(fn.get("name", "")), fn.get("arguments"))
            )
        out.append(PolicyOutput(text=m.get("content") or "", tool_calls=calls))
    return out


def load_replay_turns(path: Path) -> list[PolicyOutput]:
    """The assistant turns of a recorded trajectory: Ridgeline JSON, ATIF, or OpenAI messages.

    Raises:
        ConfigError: the file cannot be read or holds no assistant turns.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the trajectory ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: the trajectory is not valid JSON ({exc})") from None
    try:
        if isinstance(data, list):
            turns = _turns_from_messages(data)
        elif isinstance(data, dict) and str(data.get("schema_version", "")).startswith("ATIF"):
            turns = _turns_from_atif(data.get("steps") or [])
        elif isinstance(data, dict) and isinstance(data.get("messages"), list):
            turns = _turns_from_messages(data["messages"])
        elif isinstance(data, dict) and isinstance(data.get("steps"), list):
            turns = _turns_from_ridgeline(data["steps"])
        else:
            turns = []
    except (AttributeError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: malformed trajectory ({exc})") from None
    if not turns:
        raise ConfigError(
            f"{path}: holds no assistant turns (expected a Ridgeline trajectory, an ATIF trajectory or a "
            "list of OpenAI messages)"
        )
    return turns


class ReplayPolicy(BasePolicy):
    """Replays recorded assistant turns in order; :meth:`start` rewinds."""

    def __init__(self, turns: Sequence[PolicyOutput]) -> None:
        self._turns = list(turns)
        self._cursor = 0
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str | Path) -> ReplayPolicy:
        return cls(load_replay_turns(Path(path)))

    def start(self, task: Task | None, sandbox: Sandbox | None) -> None:
        with self._lock:
            self._cursor = 0

    def act(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> PolicyOutput:
        with self._lock:
            if self._cursor >= len(self._turns):
                raise PolicyError(f"the recorded trajectory has no more turns (it had {len(self._turns)})")
            out = self._turns[self._cursor]
            self._cursor += 1
            return out


class CallablePolicy(BasePolicy):
    """Adapts a function ``fn(messages, tools)`` into a policy.

    The function returns a :class:`PolicyOutput`, a string (a text-only turn) or a dict validated as a
    PolicyOutput (``{"text": ..., "tool_calls": [{"id", "name", "arguments"}]}``).
    """

    def __init__(self, fn: PolicyFn) -> None:
        self.fn = fn

    def act(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> PolicyOutput:
        result = self.fn(messages, tools)
        if isinstance(result, PolicyOutput):
            return result
        if isinstance(result, str):
            return PolicyOutput(text=result)
        if isinstance(result, dict):
            calls = [
                c
                if isinstance(c, ToolCall)
                else ToolCall.from_raw(str(c.get("id", "")), c["name"], c.get("arguments"))
                for c in result.get("tool_calls") or []
            ]
            return PolicyOutput.model_validate({**result, "tool_calls": calls})
        raise PolicyError(
            f"policy function {getattr(self.fn, '__qualname__', self.fn)!r} returned "
            f"{type(result).__name__}; expected a PolicyOutput, a str or a dict"
        )


def _is_policy(obj: object) -> bool:
    return not isinstance(obj, type) and callable(getattr(obj, "act", None))


def as_policy(obj: object, **kwargs: Any) -> Policy:
    """Adapt ``obj`` into a policy: a Policy instance as is, a class instantiated with ``kwargs``, a
    function wrapped in :class:`CallablePolicy`, a config or spec string built with ``build_policy``.

    Raises:
        ConfigError: ``obj`` cannot act as a policy.
    """
    if isinstance(obj, PolicyConfig | str):
        return build_policy(obj)
    if isinstance(obj, type):
        obj = obj(**kwargs)
        kwargs = {}
    if kwargs:
        raise ConfigError(f"keyword arguments are only for policy classes, not {obj!r}")
    if _is_policy(obj):
        return _with_defaults(obj)
    if callable(obj):
        return CallablePolicy(obj)
    raise ConfigError(f"{obj!r} is not a policy: expected an object with act(), a class or a function")


class _Adapted(BasePolicy):
    """Supplies no-op start/close for objects that only define ``act``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def start(self, task: Task | None, sandbox: Sandbox | None) -> None:
        if callable(getattr(self.inner, "start", None)):
            self.inner.start(task, sandbox)

    def act(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> PolicyOutput:
        out = self.inner.act(messages, tools, deadline=deadline)
        if not isinstance(out, PolicyOutput):
            raise PolicyError(
                f"{type(self.inner).__name__}.act returned {type(out).__name__}, not PolicyOutput"
            )
        return out

    def close(self) -> None:
        if callable(getattr(self.inner, "close", None)):
            self.inner.close()


def _with_defaults(obj: Any) -> Policy:
    if isinstance(obj, Policy):
        return obj
    return _Adapted(obj)


@register_policy("nop", NopConfig)
def build_nop(config: NopConfig) -> NopPolicy:
    return NopPolicy()


@register_policy("replay", ReplayConfig)
def build_replay(config: ReplayConfig) -> ReplayPolicy:
    return ReplayPolicy.from_file(config.path)


@register_policy("callable", CallableConfig)
def build_callable(config: CallableConfig) -> Policy:
    module_name, _, attr = config.target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"callable:{config.target}: cannot import {module_name!r} ({exc})") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(
                f"callable:{config.target}: {module_name!r} has no attribute {attr!r}"
            ) from None
    return as_policy(obj, **config.kwargs)
