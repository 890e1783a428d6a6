"""The frozen task spec: what ``task.toml`` may say.

Harbor-compatible layout (https://harborframework.com): ``[task]``, ``[metadata]``, ``[agent]``,
``[verifier]``, ``[environment]``. Ridgeline-only keys live under ``[ridgeline]`` or ``[metadata]``.
Unknown keys are kept (``extra="allow"``) so that tasks written for other tools round-trip; wrong
types are rejected (strict numbers and strings, no silent coercion from ``"2"`` to ``2``).
Array fields are lax at the container level only (``strict=False``): TOML arrays arrive as lists,
which strict mode would refuse for a tuple; their items stay strict.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator

_FROZEN = ConfigDict(frozen=True, extra="allow", strict=True)

PositiveFloat = float


class _Section(BaseModel):
    model_config = _FROZEN


class TaskSection(_Section):
    name: StrictStr | None = None
    description: StrictStr = ""
    keywords: tuple[StrictStr, ...] = Field(default=(), strict=False)


class AgentSection(_Section):
    timeout_sec: float = Field(default=600.0, gt=0)
    max_steps: int = Field(default=50, gt=0)

    @field_validator("timeout_sec", mode="before")
    @classmethod
    def _int_ok(cls, v: Any) -> Any:
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


class VerifierSection(_Section):
    timeout_sec: float = Field(default=120.0, gt=0)

    @field_validator("timeout_sec", mode="before")
    @classmethod
    def _int_ok(cls, v: Any) -> Any:
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


class EnvironmentSection(_Section):
    cpus: float = Field(default=1.0, gt=0)
    memory_mb: int = Field(default=1024, gt=0)
    storage_mb: int = Field(default=512, gt=0)
    pids: int = Field(default=256, gt=0)
    allow_internet: StrictBool = False
    workdir: StrictStr = "/app"
    image: StrictStr | None = None
    docker_image: StrictStr | None = None

    @field_validator("cpus", mode="before")
    @classmethod
    def _int_ok(cls, v: Any) -> Any:
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/") or ".." in v.split("/"):
            raise ValueError("must be an absolute path inside the sandbox, such as /app")
        return v.rstrip("/") or "/"


class Checkpoint(_Section):
    """A process-reward subgoal: ``check`` runs in a sandbox on the agent's state; exit 0 = reached."""

    name: StrictStr
    check: StrictStr
    weight: float = 1.0

    @field_validator("weight", mode="before")
    @classmethod
    def _int_ok(cls, v: Any) -> Any:
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


class RidgelineSection(_Section):
    """Ridgeline-only keys."""

    #: The task asks a question: the agent's submitted answer goes to /logs/agent/answer.txt.
    answer: StrictBool = False
    checkpoints: tuple[Checkpoint, ...] = Field(default=(), strict=False)
    #: Files (relative to the workdir) that the tests read; the quality inspector checks them.
    test_reads: tuple[StrictStr, ...] = Field(default=(), strict=False)
    #: Environment variables set for every command in the task's sandboxes (agent and verifier).
    env: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    #: A Dockerfile (relative to the task) for the container backend; such tasks need a container
    #: engine, and ``container_reasons`` says why the local backend cannot run them.
    dockerfile: StrictStr | None = None
    container_reasons: tuple[StrictStr, ...] = Field(default=(), strict=False)


class TaskSpec(BaseModel):
    """The whole of ``task.toml``, frozen."""

    model_config = _FROZEN

    version: StrictStr = "1.0"
    task: TaskSection = TaskSection()
    metadata: dict[str, Any] = Field(default_factory=dict)
    agent: AgentSection = AgentSection()
    verifier: VerifierSection = VerifierSection()
    environment: EnvironmentSection = EnvironmentSection()
    ridgeline: RidgelineSection = RidgelineSection()

    @property
    def domain(self) -> str:
        value = self.metadata.get("domain", self.metadata.get("category", "general"))
        return str(value)

    @property
    def difficulty(self) -> str:
        return str(self.metadata.get("difficulty", "unknown"))
