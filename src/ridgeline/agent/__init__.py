"""The agent: the loop that runs a policy with tools in a sandbox, its context budget, typed status
and trajectory."""

from ridgeline.agent.context import ContextTracker, estimate_tokens
from ridgeline.agent.loop import (
    ANSWER_PATH,
    AgentLimits,
    AgentResult,
    NullRecorder,
    Recorder,
    default_system_prompt,
    run_agent,
)
from ridgeline.agent.status import Status
from ridgeline.agent.trajectory import (
    ATIF_VERSION,
    Compaction,
    ObservationRecord,
    RecordedToolCall,
    Step,
    ToolStats,
    Trajectory,
)

__all__ = [
    "ANSWER_PATH",
    "ATIF_VERSION",
    "AgentLimits",
    "AgentResult",
    "Compaction",
    "ContextTracker",
    "NullRecorder",
    "ObservationRecord",
    "RecordedToolCall",
    "Recorder",
    "Status",
    "Step",
    "ToolStats",
    "Trajectory",
    "default_system_prompt",
    "estimate_tokens",
    "run_agent",
]
