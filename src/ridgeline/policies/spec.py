"""Policy configs, the one spec syntax, and the registry of policy types.

A policy is selected by a frozen config whose ``type`` field names a registered policy type (a
discriminated union that grows with the registry), written either as a short spec string or as a
TOML file::

    oracle                                  the reference solution (the trial runner's policy)
    nop                                     submits at once
    mock:script.json                        scripted outputs, for tests
    replay:trajectory.json                  replays the assistant turns of a recorded trajectory
    openai:MODEL                            an OpenAI-compatible endpoint (OPENAI_BASE_URL / OPENAI_API_KEY)
    openai:MODEL@http://host:port/v1        ... at an explicit base URL
    callable:package.module:function        a Python callable or Policy class
    path/to/policy.toml                     type = "openai", model = "...", temperature = 0.2, ...

New types register a config class and a builder by decorator::

    @register_policy("oracle")                       # a type without parameters
    def build_oracle(config: PolicyConfig) -> Policy: ...

    @register_policy("hf", HFConfig)                 # HFConfig(PolicyConfig), type: Literal["hf"]
    def build_hf(config: HFConfig) -> Policy: ...

Built-in types live in modules imported on first use (heavy SDKs stay unimported until needed).
:meth:`PolicyConfig.digest` is a stable hash of the canonical JSON of a config, without secrets and
without settings that cannot change what the policy does (retries, timeouts, prices); results are keyed
by it (with the task hash) so that a resumed run reuses only trials of the same policy.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, create_model, field_validator

from ridgeline.errors import ConfigError
from ridgeline.policies.base import Usage
from ridgeline.policies.pricing import ModelPrice

if TYPE_CHECKING:
    from ridgeline.policies.base import Policy


class PolicyConfig(BaseModel):
    """Base class of every policy config: frozen, unknown keys rejected, ``type`` names the policy."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str
    #: Fields left out of :meth:`digest` (they do not change what the policy does).
    digest_exclude: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_spec_arg(cls, arg: str | None) -> Self:
        """Build the config from the part of a spec string after ``type:`` (None when absent).

        Raises:
            ValueError: the argument is not valid for this type.
        """
        if arg is not None:
            raise ValueError("takes no argument")
        return cls.model_validate({})

    def resolve_paths(self, base: Path) -> Self:
        """Return a copy whose relative paths are resolved against ``base`` (a TOML file's folder)."""
        return self

    def label(self) -> str:
        """A short human-readable spec, such as ``openai:gpt-4o``."""
        return self.type

    def public_dict(self) -> dict[str, Any]:
        """The config as JSON data, without secrets; this is what trajectories record."""
        return self.model_dump(mode="json")

    def _digest_payload(self) -> dict[str, Any]:
        data = self.public_dict()
        for name in self.digest_exclude:
            data.pop(name, None)
        return data

    def digest(self) -> str:
        """``sha256:`` + 16 hex digits over the canonical JSON of the behaviour-relevant fields."""
        canonical = json.dumps(
            self._digest_payload(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _file_sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


class NopConfig(PolicyConfig):
    """Submits immediately without doing anything (the "nop must fail" check)."""

    type: Literal["nop"] = "nop"


class ScriptedCall(BaseModel):
    """One scripted tool call; ``arguments`` as an object, or as raw text (which may be invalid JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class ScriptedTurn(BaseModel):
    """One scripted assistant turn. In a script file a bare string stands for ``{"text": ...}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = ""
    tool_calls: tuple[ScriptedCall, ...] = ()
    usage: Usage | None = None


class MockConfig(PolicyConfig):
    """Scripted outputs: inline ``outputs`` or a JSON file holding a list of turns (``path``)."""

    type: Literal["mock"] = "mock"
    path: Path | None = None
    outputs: tuple[ScriptedTurn, ...] = ()
    #: Start over at the end of the script instead of failing with a PolicyError.
    loop: bool = False

    @field_validator("outputs", mode="before")
    @classmethod
    def _strings_are_text(cls, v: Any) -> Any:
        if isinstance(v, list | tuple):
            return [{"text": x} if isinstance(x, str) else x for x in v]
        return v

    @classmethod
    def from_spec_arg(cls, arg: str | None) -> Self:
        if not arg:
            raise ValueError("needs a script file: mock:FILE.json")
        path = Path(arg)
        if not path.is_file():
            raise ValueError(f"script file {arg!r} does not exist")
        return cls(path=path)

    def resolve_paths(self, base: Path) -> Self:
        if self.path is not None and not self.path.is_absolute():
            return self.model_copy(update={"path": base / self.path})
        return self

    def label(self) -> str:
        return f"mock:{self.path}" if self.path else "mock"

    def load_turns(self) -> list[ScriptedTurn]:
        """The inline outputs followed by the turns of the script file.

        Raises:
            ConfigError: the file is missing, not JSON, or not a list of turns.
        """
        turns = list(self.outputs)
        if self.path is not None:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except OSError as exc:
                raise ConfigError(f"{self.path}: cannot read the mock script ({exc.strerror})") from None
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{self.path}: the mock script is not valid JSON ({exc})") from None
            if isinstance(data, dict) and "outputs" in data:
                data = data["outputs"]
            if not isinstance(data, list):
                raise ConfigError(f"{self.path}: a mock script is a JSON list of turns")
            for i, item in enumerate(data):
                try:
                    turns.append(
                        ScriptedTurn.model_validate({"text": item} if isinstance(item, str) else item)
                    )
                except ValidationError as exc:
                    raise ConfigError(f"{self.path}: turn {i}: {_format_errors(exc)}") from None
        return turns

    def _digest_payload(self) -> dict[str, Any]:
        data = super()._digest_payload()
        if self.path is not None:
            data["path"] = self.path.name
            data["content_sha256"] = _file_sha(self.path)
        return data


class ReplayConfig(PolicyConfig):
    """Replays the assistant turns of a recorded trajectory (Ridgeline JSON, ATIF, or a message list)."""

    type: Literal["replay"] = "replay"
    path: Path

    @classmethod
    def from_spec_arg(cls, arg: str | None) -> Self:
        if not arg:
            raise ValueError("needs a trajectory file: replay:TRAJECTORY.json")
        if not Path(arg).is_file():
            raise ValueError(f"trajectory file {arg!r} does not exist")
        return cls(path=Path(arg))

    def resolve_paths(self, base: Path) -> Self:
        return self if self.path.is_absolute() else self.model_copy(update={"path": base / self.path})

    def label(self) -> str:
        return f"replay:{self.path}"

    def _digest_payload(self) -> dict[str, Any]:
        data = super()._digest_payload()
        data["path"] = self.path.name
        data["content_sha256"] = _file_sha(self.path)
        return data


_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class CallableConfig(PolicyConfig):
    """A Python object named ``package.module:attribute``.

    A class is instantiated with ``kwargs``; an object with an ``act`` method is used as the policy;
    a plain function is called as ``fn(messages, tools)`` and returns a PolicyOutput or a string.
    """

    type: Literal["callable"] = "callable"
    target: str
    kwargs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("target")
    @classmethod
    def _target_form(cls, v: str) -> str:
        if not _TARGET.match(v):
            raise ValueError(f"expected package.module:attribute, got {v!r}")
        return v

    @classmethod
    def from_spec_arg(cls, arg: str | None) -> Self:
        if not arg:
            raise ValueError("needs a target: callable:package.module:function")
        return cls(target=arg)

    def label(self) -> str:
        return f"callable:{self.target}"


_MODEL_AT_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


class OpenAIConfig(PolicyConfig):
    """An OpenAI-compatible chat-completions endpoint with native tool calling.

    ``base_url`` and the key default to ``OPENAI_BASE_URL`` and the variable named by ``api_key_env``
    (``OPENAI_API_KEY``). ``api_key`` is never written to trajectories or digests. The digest also
    leaves out ``base_url`` (where a model is served does not change what it is), retry and timeout
    settings, and ``price``.
    """

    type: Literal["openai"] = "openai"
    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    seed: int | None = None
    #: Ask for per-token log-probs (and, from vLLM, token ids via ``extra_body``).
    logprobs: bool = False
    parallel_tool_calls: bool | None = None
    #: Extra JSON merged into each request body (server-specific sampling options).
    extra_body: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float = Field(default=600.0, gt=0)
    max_attempts: int = Field(default=6, ge=1)
    backoff_base_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=60.0, ge=0)
    #: Price override (USD per million tokens) for models missing from the built-in table.
    price: ModelPrice | None = None

    digest_exclude: ClassVar[frozenset[str]] = frozenset(
        {"base_url", "api_key_env", "timeout_s", "max_attempts", "backoff_base_s", "backoff_max_s", "price"}
    )

    @classmethod
    def from_spec_arg(cls, arg: str | None) -> Self:
        if not arg:
            raise ValueError("needs a model: openai:MODEL or openai:MODEL@http://host:port/v1")
        m = _MODEL_AT_URL.match(arg)
        if m:
            return cls(model=m["model"], base_url=m["url"])
        if "@" in arg and "://" in arg:
            raise ValueError(f"the base URL in {arg!r} must start with http:// or https://")
        return cls(model=arg)

    def label(self) -> str:
        return f"openai:{self.model}" + (f"@{self.base_url}" if self.base_url else "")


# --------------------------------------------------------------------------------------------- registry

ConfigT = TypeVar("ConfigT", bound=PolicyConfig)
Builder = Callable[[Any], "Policy"]


@dataclass(frozen=True)
class PolicyType:
    name: str
    config_cls: type[PolicyConfig]
    builder: Builder


_registry: dict[str, PolicyType] = {}
_registry_lock = threading.RLock()

#: Built-in types and the module that registers each, imported on first use.
_LAZY: dict[str, str] = {
    "nop": "ridgeline.policies.simple",
    "replay": "ridgeline.policies.simple",
    "callable": "ridgeline.policies.simple",
    "mock": "ridgeline.policies.mock",
    "openai": "ridgeline.policies.openai",
    "oracle": "ridgeline.policies.oracle",
    "hf": "ridgeline.policies.hf",
}

_FORMS = (
    "oracle",
    "nop",
    "mock:FILE.json",
    "replay:TRAJECTORY.json",
    "openai:MODEL",
    "openai:MODEL@http://HOST:PORT/v1",
    "callable:package.module:function",
    'a .toml file with type = "..."',
)


def register_policy(
    name: str, config_cls: type[ConfigT] | None = None
) -> Callable[[Callable[[ConfigT], Policy]], Callable[[ConfigT], Policy]]:
    """Register a policy type: a decorator on its builder ``(config) -> Policy``.

    Without ``config_cls`` the type takes no parameters (a config class with only ``type`` is made).
    Registering a name again replaces the previous entry.
    """
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        raise ValueError(f"policy type names are lower-case identifiers, got {name!r}")
    cls: type[PolicyConfig] = config_cls if config_cls is not None else _bare_config(name)

    def decorate(builder: Callable[[ConfigT], Policy]) -> Callable[[ConfigT], Policy]:
        with _registry_lock:
            _registry[name] = PolicyType(name, cls, builder)
        return builder

    return decorate


def _bare_config(name: str) -> type[PolicyConfig]:
    title = "".join(part.capitalize() for part in re.split(r"[-_]", name)) + "Config"
    fields: dict[str, Any] = {"type": (Literal.__getitem__(name), name)}
    model: type[PolicyConfig] = create_model(title, __base__=PolicyConfig, **fields)
    return model


def _lookup(name: str) -> PolicyType | None:
    with _registry_lock:
        entry = _registry.get(name)
        if entry is None and name in _LAZY:
            try:
                importlib.import_module(_LAZY[name])
            except ModuleNotFoundError as exc:
                if exc.name != _LAZY[name]:
                    raise
            entry = _registry.get(name)
        return entry


def registered_policy_types() -> list[str]:
    """Names of the policy types that can be built now (built-ins are imported to check)."""
    names = set(_LAZY) | set(_registry)
    return sorted(n for n in names if _lookup(n) is not None)


def _valid_forms() -> str:
    extra = sorted(set(_registry) - {"oracle", "nop", "mock", "replay", "openai", "callable"})
    return " | ".join([*_FORMS, *(f"{n}[:ARG]" for n in extra)])


def _format_errors(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def config_from_dict(data: dict[str, Any], *, source: str = "policy config") -> PolicyConfig:
    """Validate a config given as data (from TOML, JSON or an API call); ``type`` picks the class.

    Raises:
        ConfigError: unknown type or invalid fields; the message names ``source`` and the field.
    """
    kind = data.get("type")
    if not isinstance(kind, str):
        raise ConfigError(f"{source}: missing 'type' (one of: {', '.join(registered_policy_types())})")
    entry = _lookup(kind)
    if entry is None:
        raise ConfigError(
            f"{source}: unknown policy type {kind!r} (one of: {', '.join(registered_policy_types())})"
        )
    try:
        return entry.config_cls.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_format_errors(exc)}") from None


def load_policy_toml(path: str | Path) -> PolicyConfig:
    """Load a policy config from a TOML file; relative paths in it are relative to the file.

    Raises:
        ConfigError: the file is missing, not TOML, or not a valid config.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: policy file does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read the policy file ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: is not valid TOML: {exc}") from None
    return config_from_dict(data, source=str(p)).resolve_paths(p.parent)


def parse_policy_spec(spec: str) -> PolicyConfig:
    """Parse a spec string (see the module docstring) into a config.

    Raises:
        UserError: (a ConfigError) naming the spec and the valid forms.
    """
    text = spec.strip()
    if not text:
        raise ConfigError(f"empty policy spec; expected one of: {_valid_forms()}")
    if text.lower().endswith(".toml"):
        return load_policy_toml(text)
    name, sep, arg = text.partition(":")
    entry = _lookup(name) if re.fullmatch(r"[a-z][a-z0-9_-]*", name) else None
    if entry is None and name in _LAZY:
        raise ConfigError(
            f"policy type {name!r} is not available in this installation ({_LAZY[name]} is missing)"
        )
    if entry is None:
        hint = " (no such file)" if ("/" in text or "." in name) and not sep else ""
        raise ConfigError(f"unknown policy spec {spec!r}{hint}; expected one of: {_valid_forms()}")
    try:
        return entry.config_cls.from_spec_arg(arg if sep else None)
    except ValidationError as exc:
        raise ConfigError(f"policy spec {spec!r}: {_format_errors(exc)}") from None
    except ValueError as exc:
        raise ConfigError(f"policy spec {spec!r}: {name} {exc}") from None


def build_policy(config: PolicyConfig | str) -> Policy:
    """Build a policy from a config (or a spec string). Build one per trial.

    Raises:
        ConfigError: the type is not registered or the config cannot be built.
    """
    if isinstance(config, str):
        config = parse_policy_spec(config)
    entry = _lookup(config.type)
    if entry is None:
        raise ConfigError(
            f"policy type {config.type!r} is not available; one of: {', '.join(registered_policy_types())}"
        )
    if not isinstance(config, entry.config_cls):
        config = config_from_dict(config.model_dump(), source=config.label())
    return entry.builder(config)
