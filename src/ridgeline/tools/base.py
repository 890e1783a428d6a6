"""The Tool abstraction: a typed action with an OpenAI function-calling schema.

A tool declares its arguments as a pydantic model. The schema the model sees is generated from that
model, and every call is validated against it *before* anything runs: a call with missing, extra or
mistyped arguments never reaches the sandbox; it becomes an error :class:`Observation` that the model
sees (and that the agent loop counts as an invalid call).

Failures are split by boundary, as everywhere in Ridgeline:

* :class:`~ridgeline.errors.ToolError` (and the ``OSError`` family raised by sandbox file access, such
  as ``FileNotFoundError``) — the *call* was wrong; it becomes an error observation.
* :class:`~ridgeline.errors.SandboxError` — the infrastructure failed; it propagates and ends the
  episode with status ``infra_fail``.
"""

from __future__ import annotations

import abc
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ridgeline.errors import ToolError
from ridgeline.sandbox.base import Sandbox

ArgsT = TypeVar("ArgsT", bound=BaseModel)

#: An OpenAI function-calling tool schema: ``{"type": "function", "function": {...}}``.
ToolSchema = dict[str, Any]


class ToolArgs(BaseModel):
    """Base class for tool argument models: unknown arguments are rejected and values are not coerced
    from the wrong JSON type (strict mode; an integer is still accepted where a number is expected)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Observation(BaseModel):
    """What a tool call produced.

    ``text`` is exactly what the model sees; the other fields are the structured record kept in the
    trajectory. ``done`` is set by tools that end the episode (``submit``), with ``answer`` optional.
    """

    model_config = ConfigDict(frozen=True)

    text: str
    stdout: str | None = None
    stderr: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    truncated: bool = False
    #: Set when the call failed (invalid arguments, unknown tool, missing file...); ``text`` explains it.
    error: str | None = None
    done: bool = False
    answer: str | None = None

    @classmethod
    def failure(cls, message: str) -> Observation:
        return cls(text=f"error: {message}", error=message)


@dataclass
class ToolContext:
    """What a tool may use while it runs: the trial's sandbox and the episode deadline."""

    sandbox: Sandbox
    #: ``time.monotonic()`` value at which the episode ends; None = no wall-clock limit.
    deadline: float | None = None

    def remaining_s(self) -> float | None:
        """Seconds left before the episode deadline (may be <= 0), or None when unlimited."""
        return None if self.deadline is None else self.deadline - time.monotonic()


def _strip_titles(node: Any, *, mapping: bool = False) -> Any:
    """Drop pydantic's auto-generated ``title`` keys (noise for the model); ``mapping`` marks a dict
    whose keys are names (``properties``, ``$defs``), where a key called "title" is a real field."""
    if isinstance(node, dict):
        return {
            k: _strip_titles(v, mapping=k in ("properties", "$defs") and not mapping)
            for k, v in node.items()
            if mapping or not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def _format_validation(tool: str, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        if e["type"] == "extra_forbidden":
            parts.append(f"unexpected argument '{loc}'")
        elif e["type"] == "missing":
            parts.append(f"missing required argument '{loc}'")
        elif loc:
            parts.append(f"argument '{loc}': {e['msg']}")
        else:
            parts.append(e["msg"])
    return f"invalid arguments for {tool}: " + "; ".join(parts)


class Tool(abc.ABC, Generic[ArgsT]):
    """A typed action. Subclasses set ``name``, ``description`` and ``args_model`` and implement
    :meth:`run`.

    Example::

        class Echo(ToolArgs):
            text: str

        class EchoTool(Tool[Echo]):
            name = "echo"
            description = "Echo the text back."
            args_model = Echo

            def run(self, args: Echo, ctx: ToolContext) -> Observation:
                return Observation(text=args.text)
    """

    name: str
    description: str
    args_model: type[ArgsT]

    def schema(self) -> ToolSchema:
        """The OpenAI function-calling schema of this tool."""
        params = _strip_titles(self.args_model.model_json_schema())
        params.setdefault("properties", {})
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }

    def validate(self, arguments: str | dict[str, Any]) -> ArgsT:
        """Parse and validate raw arguments (a JSON string or an already-parsed object).

        Raises:
            ToolError: the arguments are not a JSON object or do not match the schema.
        """
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise ToolError(f"arguments for {self.name} are not valid JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise ToolError(
                f"arguments for {self.name} must be a JSON object, got {type(arguments).__name__}"
            )
        try:
            return self.args_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolError(_format_validation(self.name, exc)) from None

    @abc.abstractmethod
    def run(self, args: ArgsT, ctx: ToolContext) -> Observation:
        """Carry out a validated call.

        Raises:
            ToolError: the call failed in a way the model should see (it becomes an error observation).
            SandboxError: the sandbox failed (infrastructure); the episode ends with ``infra_fail``.
        """


class FunctionTool(Tool[ArgsT]):
    """A tool made from a plain function, for task-specific tools::

    class Render(ToolArgs):
        scene: str

    def render(args: Render, ctx: ToolContext) -> Observation: ...

    tool = FunctionTool("render", "Render the scene to a PNG.", Render, render)
    """

    def __init__(
        self,
        name: str,
        description: str,
        args_model: type[ArgsT],
        fn: Callable[[ArgsT, ToolContext], Observation | str],
    ) -> None:
        self.name = name
        self.description = description
        self.args_model = args_model
        self._fn = fn

    def run(self, args: ArgsT, ctx: ToolContext) -> Observation:
        out = self._fn(args, ctx)
        return Observation(text=out) if isinstance(out, str) else out


@dataclass(frozen=True)
class ToolOutcome:
    """The result of dispatching one tool call: validity, parsed arguments and the observation."""

    observation: Observation
    #: False when the call never ran: unknown tool, bad JSON, arguments not matching the schema.
    valid: bool
    parsed: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        return self.observation.done


class Toolset:
    """An ordered, name-keyed collection of tools; dispatches calls with validation.

    Tasks add their own tools with :meth:`add` (a name may be registered once; use :meth:`replace`
    to swap a built-in deliberately).
    """

    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool[Any]) -> Toolset:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already in this toolset")
        self._tools[tool.name] = tool
        return self

    def replace(self, tool: Tool[Any]) -> Toolset:
        self._tools[tool.name] = tool
        return self

    def remove(self, name: str) -> Toolset:
        self._tools.pop(name, None)
        return self

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[ToolSchema]:
        return [t.schema() for t in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def call(self, name: str, arguments: str | dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Validate and run one call. Never raises for a bad call; raises only for infrastructure.

        Raises:
            SandboxError: the sandbox failed while the tool ran.
        """
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "(none)"
            return ToolOutcome(Observation.failure(f"unknown tool {name!r}; available tools: {known}"), False)
        try:
            args = tool.validate(arguments)
        except ToolError as exc:
            return ToolOutcome(Observation.failure(str(exc)), False)
        parsed = args.model_dump(mode="json")
        try:
            obs = tool.run(args, ctx)
        except ToolError as exc:
            obs = Observation.failure(str(exc))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
            obs = Observation.failure(f"{name}: {_describe_os_error(exc)}")
        return ToolOutcome(obs, True, parsed)


def _describe_os_error(exc: OSError) -> str:
    kind = {
        FileNotFoundError: "no such file",
        IsADirectoryError: "is a directory",
        NotADirectoryError: "not a directory",
        PermissionError: "permission denied",
    }.get(type(exc), exc.strerror or type(exc).__name__)
    where = exc.filename if exc.filename is not None else (exc.args[0] if exc.args else "")
    return f"{kind}: {where}" if where else kind
