"""One exception per boundary.

Every error a user can cause (a bad task, a bad config, a bad flag) is a subclass of
:class:`RidgelineError` whose message names the file / field / value and what was expected. The CLI
prints these as one line and exits 1; it never shows a traceback for them.

Failures are attributed to a boundary so that a trial can tell "the infrastructure failed"
(:class:`SandboxError`, :class:`PolicyServiceError`) from "the agent did something wrong"
(:class:`ToolError`, a non-zero exit code, a failed test).
"""

from __future__ import annotations


class RidgelineError(Exception):
    """Base class for every error Ridgeline raises on purpose."""


class UserError(RidgelineError):
    """Bad input from the user: a flag, a config file, a path."""


class ConfigError(UserError):
    """A configuration file or option is invalid."""


class TaskError(UserError):
    """A task directory is invalid. The message names the file and the field."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.detail = message
        super().__init__(f"{path}: {message}")


class MissingExtraError(UserError):
    """An optional dependency group is not installed."""


class SandboxError(RidgelineError):
    """The sandbox itself failed (infrastructure): it could not be created, entered or cleaned up.

    A command that runs and exits non-zero is *not* a SandboxError; it is a normal result.
    """


class SandboxClosedError(SandboxError):
    """An operation was attempted on a sandbox that is already closed."""


class SandboxUnavailableError(SandboxError):
    """The backend cannot run on this machine (missing bwrap, no container engine, not root...)."""


class ToolError(RidgelineError):
    """A tool call was invalid or failed in a way the model should see as an observation."""


class PolicyError(RidgelineError):
    """The policy produced something unusable (bad output), or its spec is invalid."""


class PolicyServiceError(RidgelineError):
    """The model service failed (connection refused, 5xx after retries): an infrastructure failure."""


class VerifierError(RidgelineError):
    """The verifier could not produce a reward (missing or malformed reward file)."""


class TaskSetupError(RidgelineError):
    """A task's ``environment/setup.sh`` failed: the task is broken, not the agent or the sandbox."""
