"""Agent-session workload scripts: parse, validate, budget, canonical encode. No Dagster here."""

from substrate_assets.workload.budget import Budget, budgets
from substrate_assets.workload.decode import decode
from substrate_assets.workload.encode import encode
from substrate_assets.workload.errors import Position, ScriptError, ScriptNotFound, ScriptProblem
from substrate_assets.workload.library import ScriptFile, ScriptLibrary, load_script_file
from substrate_assets.workload.model import Op, OpKind, Script, Step
from substrate_assets.workload.summary import ScriptSummary, step_table_markdown, summarize

__all__ = [
    "Budget",
    "Op",
    "OpKind",
    "Position",
    "Script",
    "ScriptError",
    "ScriptFile",
    "ScriptLibrary",
    "ScriptNotFound",
    "ScriptProblem",
    "ScriptSummary",
    "Step",
    "budgets",
    "decode",
    "encode",
    "load_script_file",
    "step_table_markdown",
    "summarize",
]
