"""Canonical encoding: the one text form of a script, such that ``decode(encode(s)) == s``.

Top-level keys in the order ``name``, ``min_actor_memory``, ``steps``; each op
on one line as a flow map; sizes in Kubernetes' canonical BinarySI form;
``parallel`` always written for ``burn_cpu``.
"""

from __future__ import annotations

from typing import Any

import yaml

from substrate_assets.workload.duration import format_duration
from substrate_assets.workload.model import Op, Script
from substrate_assets.workload.quantity import format_binary_si


class _FlowMap(dict[str, Any]):
    """A mapping written on one line (``{key: repo, size: 16Mi}``)."""


class _Dumper(yaml.SafeDumper):  # type: ignore[misc]  # yaml ships no types: SafeDumper is Any
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Indent list items under their key, as yaml.v3 does with SetIndent(2).
        super().increase_indent(flow, False)


_Dumper.add_representer(
    _FlowMap, lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)
)


def _op_document(op: Op) -> dict[str, Any]:
    arguments = _FlowMap()
    if op.kind.takes_key:
        arguments["key"] = op.key
    if op.kind.takes_size:
        arguments["size"] = format_binary_si(op.size or 0)
    if op.kind.takes_millis:
        arguments["millis"] = op.millis
        arguments["parallel"] = op.parallel
    return {op.kind.value: arguments}


def encode(script: Script) -> str:
    document = {
        "name": script.name,
        "min_actor_memory": format_binary_si(script.min_actor_memory),
        "steps": [
            {
                "name": step.name,
                "agent": step.agent,
                "think": format_duration(step.think_ns),
                "ops": [_op_document(op) for op in step.ops],
            }
            for step in script.steps
        ],
    }
    # Without a stream, yaml.dump returns the text.
    text: str = yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                          allow_unicode=True, width=1_000_000, indent=2)
    return text
