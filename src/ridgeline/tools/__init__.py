"""Tools: typed actions with OpenAI function-calling schemas, validated before they run."""

from ridgeline.tools.base import (
    FunctionTool,
    Observation,
    Tool,
    ToolArgs,
    ToolContext,
    ToolOutcome,
    ToolSchema,
    Toolset,
)
from ridgeline.tools.builtin import (
    DEFAULT_BASH_TIMEOUT_S,
    DEFAULT_MAX_OUTPUT_BYTES,
    BashTool,
    EditFileTool,
    ReadFileTool,
    SubmitTool,
    WriteFileTool,
    default_toolset,
    truncate_middle,
)

#: Alias: a registry of tools is a :class:`Toolset`.
ToolRegistry = Toolset

__all__ = [
    "DEFAULT_BASH_TIMEOUT_S",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "BashTool",
    "EditFileTool",
    "FunctionTool",
    "Observation",
    "ReadFileTool",
    "SubmitTool",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolOutcome",
    "ToolRegistry",
    "ToolSchema",
    "Toolset",
    "WriteFileTool",
    "default_toolset",
    "truncate_middle",
]
