"""Property: whatever the input, decoding yields a Script or raises ScriptError, nothing else."""

from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from substrate_assets.workload import Script, ScriptError, decode, encode

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
CODING_SESSION = (SCRIPTS / "coding-session.yaml").read_text()
QUICK_SESSION = (SCRIPTS / "quick-session.yaml").read_text()

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12),
    st.sampled_from(["1Gi", "32Mi", "0", "-1", "1.5Ki", "2s", "0s", "1d", "ping", "key", "size", "millis",
                     "parallel", "fill_ram", "walk_ram", "read_disk_data", "burn_cpu", "../x", "2147483648"]),
)
field_names = st.sampled_from(["name", "min_actor_memory", "steps", "agent", "think", "ops", "key", "size",
                               "millis", "parallel", "ping", "fill_ram", "ingest", "x"])
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(field_names, st.text(max_size=5)), children, max_size=5),
    ),
    max_leaves=25,
)


def decodes_or_raises_script_error(text: str | bytes) -> None:
    try:
        result = decode(text, path="fuzz.yaml")
    except ScriptError as error:
        assert error.problems and all(str(p).startswith("fuzz.yaml") for p in error.problems)
    else:
        assert isinstance(result, Script)
        assert decode(encode(result)) == result


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_arbitrary_yaml_documents(document):
    decodes_or_raises_script_error(yaml.safe_dump(document, allow_unicode=True))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_arbitrary_text_and_bytes(data):
    decodes_or_raises_script_error(data)


@st.composite
def mutated_text(draw):
    text = draw(st.sampled_from([CODING_SESSION, QUICK_SESSION]))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "duplicate", "swap", "char", "insert"]))
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "char" and lines[i]:
            k = draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:k] + draw(st.characters()) + lines[i][k + 1:]
        else:
            lines.insert(i, draw(st.text(max_size=30)) + "\n")
    return "".join(lines)


@settings(max_examples=400, deadline=None)
@given(mutated_text())
def test_mutated_valid_scripts_text(text):
    decodes_or_raises_script_error(text)


@st.composite
def mutated_document(draw):
    document = yaml.safe_load(draw(st.sampled_from([CODING_SESSION, QUICK_SESSION])))
    for _ in range(draw(st.integers(1, 3))):
        node = document
        path = []
        while isinstance(node, (dict, list)) and node and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
            path.append((node, key))
            node = node[key]
        if not path:
            continue
        parent, key = path[-1]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[key] = draw(documents)
        elif action == "delete":
            del parent[key]
        elif isinstance(parent, dict):
            parent[draw(field_names)] = draw(documents)
        else:
            parent.insert(key, draw(documents))
    return document


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_document())
def test_mutated_valid_scripts_structure(document):
    decodes_or_raises_script_error(yaml.safe_dump(document, allow_unicode=True, sort_keys=False))
