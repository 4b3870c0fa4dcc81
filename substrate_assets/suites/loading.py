"""Reading ``suites.yaml``: every suite validated, each error pointing at its file, line and column."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from substrate_assets.analysis.thresholds import Thresholds
from substrate_assets.project import project_root, scripts_directory
from substrate_assets.suites.errors import SuiteError, explained
from substrate_assets.suites.suite import Suite
from substrate_assets.workload.decode import alias_expansion_problem
from substrate_assets.workload.errors import ScriptError
from substrate_assets.workload.library import ScriptLibrary, read_document


def _node_at(root: yaml.Node, location: tuple[Any, ...]) -> yaml.Node:
    node = root
    for part in location:
        if isinstance(node, yaml.MappingNode):
            matches = [value for key, value in node.value if getattr(key, "value", None) == str(part)]
            if not matches:
                return node
            node = matches[0]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return node
    return node


def hold_problem(suite: Suite, scripts: Path) -> str | None:
    """Why the suite's ladder holds a step for less than one lap of its script's thinks, if it does: a step that
    ends mid-lap measures sessions that never reached their later steps. None when there is no ladder, or when the
    script cannot be loaded (script validation says why, where the script is). load_suites checks it; a caller
    that overrides think_scale (with_overrides) checks the copy again with this."""
    if suite.ladder is None or suite.script is None:
        return None
    try:
        script = ScriptLibrary(scripts).load(suite.script).script
    except (ScriptError, OSError, ValueError):
        return None
    scale = suite.think_scale or 1.0  # 0 reads as 1, as the field says
    cycle_s = script.think_per_lap_ns * scale / 1e9
    if suite.ladder.hold_s >= cycle_s:
        return None
    return (f"{suite.ladder.hold} is shorter than one think cycle of script {suite.script} "
            f"({script.think_per_lap_ns / 1e9:g}s of think per lap × think scale {scale:g} = {cycle_s:g}s); "
            "each step must hold every session through its whole script")


def load_suites(path: Path | None = None, scripts: Path | None = None) -> dict[str, Suite]:
    """Every suite in ``suites.yaml``, by name; a SuiteError says which line is wrong and why.

    ``scripts`` is where a ladder suite's script is read to check its hold against one think cycle: by default the
    ``scripts/`` directory beside the suites file, else the project's (deploy/suites.cluster.yaml has none)."""
    path = path or project_root() / "suites.yaml"
    if scripts is None:
        scripts = path.parent / "scripts" if (path.parent / "scripts").is_dir() else scripts_directory()
    try:
        text = read_document(path).decode("utf-8")
    except OSError as error:
        raise SuiteError(f"{path}: cannot read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise SuiteError(f"{path}: not UTF-8 text: {error.reason} at byte {error.start}") from None
    except ValueError as error:  # larger than any suites file needs
        raise SuiteError(f"{path}: {error}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        # Checked before anything is built from the nodes: a "billion laughs" document composes in a moment, but
        # every walk of what it constructs (validation, trial.json) would run out of memory.
        bomb = alias_expansion_problem(root) if root is not None else None
        if bomb is not None:
            raise SuiteError(f"{path}:{bomb.line}:{bomb.column}: {bomb.message}")
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SuiteError(f"{path}: invalid YAML: {error}") from None
    except RecursionError:
        raise SuiteError(f"{path}: invalid YAML: nested too deeply") from None
    if root is None or not isinstance(document, dict) or not isinstance(document.get("suites"), list):
        raise SuiteError(f"{path}:1:1: expected a mapping with a 'suites' list")
    unknown = set(document) - {"suites"}
    if unknown:
        raise SuiteError(f"{path}:1:1: unknown top-level field(s): {', '.join(sorted(unknown))}")
    suites: dict[str, Suite] = {}
    problems: list[str] = []
    for index, entry in enumerate(document["suites"]):
        named = isinstance(entry, dict) and entry.get("name")
        label = f"suite {entry['name']!r}" if named else f"suite {index + 1}"
        try:
            suite = Suite.model_validate(entry)
        except ValidationError as error:
            for detail in error.errors():
                node = _node_at(root, ("suites", index, *detail["loc"]))
                line, column = node.start_mark.line + 1, node.start_mark.column + 1
                problems.append(f"{path}:{line}:{column}: {label}: {explained(detail)}")
            continue
        if suite.name in suites:
            node = _node_at(root, ("suites", index, "name"))
            problems.append(f"{path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}: "
                            f"suite {suite.name!r} is defined twice")
            continue
        hold = hold_problem(suite, scripts)
        if hold is not None:
            node = _node_at(root, ("suites", index, "ladder", "hold"))
            problems.append(f"{path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}: "
                            f"{label}: ladder.hold: {hold}")
            continue
        suites[suite.name] = suite
    if problems:
        raise SuiteError("\n".join(problems))
    return suites


def get_suite(name: str, path: Path | None = None) -> Suite:
    suites = load_suites(path)
    if name not in suites:
        raise SuiteError(f"no suite {name!r} in {path or project_root() / 'suites.yaml'} "
                         f"(have {', '.join(sorted(suites)) or 'none'})")
    return suites[name]


def compare_thresholds(suite: str | None, suites: Mapping[str, Suite]) -> tuple[Thresholds, str]:
    """The thresholds a comparison whose candidate ran ``suite`` is judged by, and where they come from: the suite's
    ``compare:``, or the defaults for a suite ``suites`` does not have (an imported run's)."""
    if suite is not None and suite in suites:
        return suites[suite].compare, f"thresholds of suite {suite}"
    return Thresholds(), f"default thresholds (suite {suite} is not in suites.yaml)"
