"""Strict decoding of a script document: YAML text to a :class:`Script`, or a :class:`ScriptError`.

The document is composed (not constructed) with PyYAML so every value keeps
its line and column. Decoding is as strict as upstream's ``yaml.v3`` decoder
with ``KnownFields(true)``: unknown fields, duplicate keys, wrong shapes and
bad arguments are all errors. Every problem found while decoding is reported,
not only the first; if decoding succeeds, :func:`validate` applies the script
rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from substrate_assets.workload.duration import DurationError, parse_duration
from substrate_assets.workload.errors import Position, ScriptError, ScriptProblem
from substrate_assets.workload.model import KEY_PATTERN, Op, OpKind, Script, Step
from substrate_assets.workload.quantity import INT32_MAX, INT64_MAX, QuantityError, parse_byte_count
from substrate_assets.workload.text import quote

_NULL_TAG = "tag:yaml.org,2002:null"
_INTEGER = re.compile(r"[-+]?[0-9]+")
_INT32_MIN = -(2**31)
_INT64_MIN = -(2**63)

# A script, or suites.yaml, is a page or two of YAML (coding-session: 4.4 KiB); a thousand times that is still no
# real workload, and the cap keeps a runaway file from costing minutes and gigabytes to parse.
MAX_DOCUMENT_BYTES = 1 << 20
# What aliases may add to a document, in nodes. Anchors that share a section a few times add hundreds; a "billion
# laughs" document adds billions, which no walk of it would survive.
ALIAS_EXPANSION_LIMIT = 100_000

_SCRIPT_FIELDS = ("name", "min_actor_memory", "steps")
_STEP_FIELDS = ("name", "agent", "think", "ops")
_OP_ARGUMENTS = ("key", "size", "millis", "parallel")

try:  # libyaml is much faster and keeps the same marks
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - wheels ship libyaml
    _Loader = yaml.SafeLoader


def position_of(node: yaml.Node) -> Position:
    return Position(node.start_mark.line + 1, node.start_mark.column + 1)


@dataclass
class _Context:
    """Where in the script a problem belongs."""

    step: str | None = None
    step_number: int | None = None
    op_index: int | None = None
    op_kind: str | None = None


@dataclass
class _Decoder:
    problems: list[ScriptProblem] = field(default_factory=list)

    def problem(self, message: str, node: yaml.Node | Position | None, where: _Context | None = None) -> None:
        position = position_of(node) if isinstance(node, yaml.Node) else node
        where = where or _Context()
        self.problems.append(ScriptProblem(message, None, position, where.step, where.step_number,
                                           where.op_index, where.op_kind))

    # -- shapes -----------------------------------------------------------

    def fields(self, node: yaml.MappingNode, allowed: tuple[str, ...], where: _Context,
               what: str, expected: tuple[str, ...] | None = None) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """The entries of a mapping, refusing unknown and repeated keys."""
        found: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.problem(f"{what} keys must be plain names", key_node, where)
                continue
            key = key_node.value
            if key in found:
                first = found[key][0].start_mark.line + 1
                self.problem(f"mapping key {quote(key)} already defined at line {first}", key_node, where)
                continue
            if key not in allowed:
                shown = ", ".join(expected if expected is not None else allowed) or "nothing"
                self.problem(f"field {key} not found in {what} (expected: {shown})", key_node, where)
                continue
            found[key] = (key_node, value_node)
        return found

    def string(self, entry: tuple[yaml.Node, yaml.Node] | None, label: str, where: _Context) -> str:
        """A scalar read as text; a null or absent value reads as empty, as yaml.v3 leaves it."""
        if entry is None:
            return ""
        value = entry[1]
        if isinstance(value, yaml.ScalarNode):
            return "" if value.tag == _NULL_TAG else value.value
        self.problem(f"{label}: expected a string, got a {_shape(value)}", value, where)
        return ""

    def integer(self, entry: tuple[yaml.Node, yaml.Node] | None, label: str, low: int, high: int,
                bits: int, where: _Context) -> int:
        if entry is None:
            return 0
        value = entry[1]
        if isinstance(value, yaml.ScalarNode) and value.tag == _NULL_TAG:
            return 0
        if not (isinstance(value, yaml.ScalarNode) and not value.style and _INTEGER.fullmatch(value.value)):
            shown = quote(value.value) if isinstance(value, yaml.ScalarNode) else f"a {_shape(value)}"
            self.problem(f"{label}: expected a whole number, got {shown}", value, where)
            return 0
        number = int(value.value)
        if not low <= number <= high:
            self.problem(f"{label}: {number} does not fit in int{bits}", value, where)
            return 0
        return number

    def sequence(self, entry: tuple[yaml.Node, yaml.Node] | None, label: str,
                 where: _Context) -> list[yaml.Node]:
        if entry is None:
            return []
        value = entry[1]
        if isinstance(value, yaml.SequenceNode):
            return list(value.value)
        if isinstance(value, yaml.ScalarNode) and value.tag == _NULL_TAG:
            return []
        self.problem(f"{label}: expected a list, got a {_shape(value)}", value, where)
        return []

    # -- document ---------------------------------------------------------

    def script(self, root: yaml.Node) -> Script | None:
        top = _Context()
        if not isinstance(root, yaml.MappingNode):
            self.problem(f"a script is a mapping with {', '.join(_SCRIPT_FIELDS)}; got a {_shape(root)}",
                         root, top)
            return None
        entries = self.fields(root, _SCRIPT_FIELDS, top, "script")
        name = self.string(entries.get("name"), "name", top)
        memory_text = self.string(entries.get("min_actor_memory"), "min_actor_memory", top)
        min_actor_memory = 0
        if memory_text:
            try:
                min_actor_memory = parse_byte_count(memory_text)
            except QuantityError as error:
                self.problem(f"min_actor_memory: {error}", entries["min_actor_memory"][1], top)
        steps = tuple(
            step
            for number, node in enumerate(self.sequence(entries.get("steps"), "steps", top), start=1)
            if (step := self.step(node, number)) is not None
        )
        positions = {key: position_of(value) for key, (_, value) in entries.items()}
        return Script(name, min_actor_memory, steps, position=position_of(root), field_positions=positions)

    def step(self, node: yaml.Node, number: int) -> Step | None:
        where = _Context(step_number=number)
        if not isinstance(node, yaml.MappingNode):
            self.problem(f"a step is a mapping with {', '.join(_STEP_FIELDS)}; got a {_shape(node)}",
                         node, where)
            return None
        where.step = _peek_name(node)
        entries = self.fields(node, _STEP_FIELDS, where, "step")
        name = self.string(entries.get("name"), "name", where)
        agent = self.string(entries.get("agent"), "agent", where)
        think_text = self.string(entries.get("think"), "think", where)
        think_ns = 0
        if think_text:
            try:
                think_ns = parse_duration(think_text)
            except DurationError as error:
                self.problem(f"think: {error} (a Go duration such as 2s, 1.5s or 500ms)",
                             entries["think"][1], where)
        ops = tuple(
            op
            for index, op_node in enumerate(self.sequence(entries.get("ops"), "ops", where))
            if (op := self.op(op_node, _Context(name or None, number, index))) is not None
        )
        positions = {key: position_of(value) for key, (_, value) in entries.items()}
        return Step(name, agent, think_ns, ops, position=position_of(node), field_positions=positions)

    def op(self, node: yaml.Node, where: _Context) -> Op | None:
        if not isinstance(node, yaml.MappingNode) or len(node.value) != 1:
            keys = len(node.value) if isinstance(node, yaml.MappingNode) else 0
            self.problem(f"an op is a single-key map such as {{ping: {{}}}}, got {keys} keys"
                         if isinstance(node, yaml.MappingNode) else
                         f"an op is a single-key map such as {{ping: {{}}}}, got a {_shape(node)}",
                         node, where)
            return None
        kind_node, arguments_node = node.value[0]
        kind_text = kind_node.value if isinstance(kind_node, yaml.ScalarNode) else ""
        try:
            kind = OpKind(kind_text)
        except ValueError:
            known = ", ".join(kind.value for kind in OpKind)
            self.problem(f"unknown op kind {quote(kind_text)} (known: {known})", kind_node, where)
            return None
        where.op_kind = kind.value
        entries: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        if isinstance(arguments_node, yaml.MappingNode):
            takes = tuple(name for name, taken in (("key", kind.takes_key), ("size", kind.takes_size),
                                                   ("millis", kind.takes_millis),
                                                   ("parallel", kind.takes_millis)) if taken)
            entries = self.fields(arguments_node, _OP_ARGUMENTS, where, f"{kind.value} arguments", takes)
        elif not (isinstance(arguments_node, yaml.ScalarNode) and arguments_node.tag == _NULL_TAG):
            self.problem(f"arguments must be a mapping such as {{key: x}}, got a {_shape(arguments_node)}",
                         arguments_node, where)
            return None
        before = len(self.problems)
        op_position = position_of(node)

        def at(argument: str) -> Position:
            return position_of(entries[argument][1]) if argument in entries else op_position

        key = self.string(entries.get("key"), "key", where) or None
        size_text = self.string(entries.get("size"), "size", where) or None
        millis = self.integer(entries.get("millis"), "millis", _INT64_MIN, INT64_MAX, 64, where)
        parallel = self.integer(entries.get("parallel"), "parallel", _INT32_MIN, INT32_MAX, 32, where)
        if len(self.problems) != before:
            return None

        def report(message: str, position: Position) -> None:
            self.problem(message, position, where)

        if kind.takes_key and key is None:
            report("key is required", op_position)
        elif not kind.takes_key and key is not None:
            report("takes no key", at("key"))
        elif key is not None and not KEY_PATTERN.fullmatch(key):
            report(f"key {quote(key)} must match {KEY_PATTERN.pattern} "
                   "(keys name files and arrays inside the actor's data directory)", at("key"))

        size: int | None = None
        if kind.takes_size and size_text is None:
            report("size is required", op_position)
        elif not kind.takes_size and size_text is not None:
            report("takes no size", at("size"))
        elif size_text is not None:
            try:
                size = parse_byte_count(size_text)
            except QuantityError as error:
                report(f"size: {error}", at("size"))
            else:
                if kind.size_on_wire_is_int32 and size > INT32_MAX:
                    report(f"size {size_text} ({size} bytes) is above the {INT32_MAX}-byte (2Gi - 1) limit "
                           f"of one {kind.value}, which travels as an int32", at("size"))

        if kind.takes_millis:
            if millis <= 0:
                report("millis must be positive", at("millis"))
            if parallel < 0:
                report("parallel cannot be negative", at("parallel"))
        elif millis != 0 or parallel != 0:
            report("takes no millis or parallel", at("millis" if millis != 0 else "parallel"))

        if len(self.problems) != before:
            return None
        positions = {name: position_of(value) for name, (_, value) in entries.items()}
        if kind.takes_millis:
            return Op(kind, millis=millis, parallel=max(parallel, 1), position=op_position,
                      argument_positions=positions)
        return Op(kind, key=key, size=size, position=op_position, argument_positions=positions)


def _peek_name(node: yaml.MappingNode) -> str | None:
    """The step's name, if it has a usable one, so problems found before it is read can name the step."""
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "name" and isinstance(value, yaml.ScalarNode):
            return value.value if value.tag != _NULL_TAG and value.value else None
    return None


def _shape(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "mapping"
    if isinstance(node, yaml.SequenceNode):
        return "list"
    if node.tag == _NULL_TAG:
        return "null"
    return f"scalar {quote(node.value)}"


def size_problem(size: int, what: str) -> str | None:
    """Why a document of ``size`` bytes is refused, or None."""
    if size <= MAX_DOCUMENT_BYTES:
        return None
    return (f"{what} is {size} bytes, above the {MAX_DOCUMENT_BYTES}-byte (1 MiB) cap, far beyond any real "
            "workload")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def alias_expansion_problem(root: yaml.Node) -> ScriptProblem | None:
    """A problem when the document's aliases would expand it by more than ALIAS_EXPANSION_LIMIT nodes, or an alias
    sits inside the node it names; located at the anchored node (a composed alias is that node itself).

    Each node's expanded size is counted once and reused wherever an alias repeats it, so the check costs one visit
    per distinct node however far the aliases would expand."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    added = 0
    pending: list[tuple[yaml.Node, bool]] = [(root, False)]
    while pending:
        node, finished = pending.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if key in open_nodes:
            return ScriptProblem("invalid YAML: an alias refers to a node that contains it (a recursive document)",
                                 position=position_of(node))
        if key in sizes:
            added += sizes[key]
            if added > ALIAS_EXPANSION_LIMIT:
                return ScriptProblem(f"invalid YAML: aliases of the node anchored here expand the document by more "
                                     f"than {ALIAS_EXPANSION_LIMIT} nodes (a YAML bomb?); write the repeated parts "
                                     "out", position=position_of(node))
            continue
        open_nodes.add(key)
        pending.append((node, True))
        pending.extend((child, False) for child in reversed(_children(node)))
    return None


def compose_document(text: str) -> yaml.Node:
    """The single YAML document in ``text``, or a ScriptError for syntax errors and empty input."""
    try:
        documents = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        position = Position(mark.line + 1, mark.column + 1) if mark else None
        reason = " ".join(part for part in (error.context, error.problem) if part)
        raise ScriptError(ScriptProblem(f"invalid YAML: {reason}", position=position)) from None
    except yaml.YAMLError as error:
        raise ScriptError(ScriptProblem(f"invalid YAML: {error}")) from None
    except RecursionError:
        raise ScriptError(ScriptProblem("invalid YAML: nested too deeply")) from None
    if not documents or (isinstance(documents[0], yaml.ScalarNode) and documents[0].tag == _NULL_TAG
                         and len(documents) == 1):
        raise ScriptError(ScriptProblem("the document is empty; a script needs name, min_actor_memory "
                                        "and steps", position=Position(1, 1)))
    if len(documents) > 1:
        raise ScriptError(ScriptProblem("a script file holds exactly one YAML document",
                                        position=position_of(documents[1])))
    bomb = alias_expansion_problem(documents[0])
    if bomb is not None:
        raise ScriptError(bomb)
    return documents[0]


def decode(data: str | bytes, path: str | None = None) -> Script:
    """Decode and validate a script; raise :class:`ScriptError` naming ``path`` on any problem."""
    from substrate_assets.workload.validate import validate

    try:
        size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
        too_large = size_problem(size, "the script")
        if too_large is not None:
            raise ScriptError(ScriptProblem(too_large))
        if isinstance(data, bytes):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ScriptError(ScriptProblem(f"not UTF-8 text: {error.reason} at byte {error.start}")) \
                    from None
        else:
            text = data
            try:  # libyaml reads UTF-8: a lone surrogate (text that never came from a file) has no encoding
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                raise ScriptError(ScriptProblem(f"not UTF-8 text: {error.reason} at character {error.start}")) \
                    from None
        decoder = _Decoder()
        script = decoder.script(compose_document(text))
        if decoder.problems:
            raise ScriptError(decoder.problems)
        assert script is not None
        problems = validate(script)
        if problems:
            raise ScriptError(problems)
        return script
    except ScriptError as error:
        raise (error.located(path) if path is not None else error) from None
