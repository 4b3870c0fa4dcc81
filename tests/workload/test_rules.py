"""Every rejection rule of the script format, each located by line, column, step and op."""

import pytest

from substrate_assets.workload import ScriptError, decode

BASE = """\
name: t
min_actor_memory: 1Gi
steps:
  - name: s1
    agent: a
    think: 1s
    ops:
      - fill_ram: {key: ctx, size: 1Mi}
      - ingest: {key: repo, size: 1Mi}
  - name: s2
    agent: b
    think: 2s
    ops:
      - OP
"""


def with_op(op: str) -> str:
    return BASE.replace("- OP", op)


def rejected(text: str) -> ScriptError:
    with pytest.raises(ScriptError) as caught:
        decode(text, path="scripts/t.yaml")
    return caught.value


# (op line, message fragment, text the reported column points at (None: the op itself), op kind shown)
OP_CASES = [
    ("- frob: {}", 'unknown op kind "frob"', "frob", None),
    ("- fill_ram: {size: 1Mi}", "key is required", None, "fill_ram"),
    ("- ping: {key: x}", "takes no key", "x}", "ping"),
    ('- walk_ram: {key: "a/b"}', 'key "a/b" must match ^[a-zA-Z0-9_-]+$', '"a/b"', "walk_ram"),
    ('- read_disk_data: {key: ".."}', 'key ".." must match', '".."', "read_disk_data"),
    ("- read_disk_digest: {key: /etc/passwd}", 'key "/etc/passwd" must match', "/etc", "read_disk_digest"),
    ("- ingest: {key: x}", "size is required", None, "ingest"),
    ("- walk_ram: {key: ctx, size: 1Mi}", "takes no size", "1Mi", "walk_ram"),
    ("- fill_ram: {key: x, size: 100m}", 'size: "100m" is not a positive whole byte count', "100m", "fill_ram"),
    ('- fill_ram: {key: x, size: "0"}', 'size: "0" is not a positive whole byte count', '"0"', "fill_ram"),
    ("- fill_ram: {key: x, size: -1Mi}", 'size: "-1Mi" is not a positive whole byte count', "-1Mi", "fill_ram"),
    ("- fill_ram: {key: x, size: lots}", 'size: "lots" is not a positive whole byte count', "lots", "fill_ram"),
    ("- burn_cpu: {millis: 0}", "millis must be positive", "0}", "burn_cpu"),
    ("- burn_cpu: {parallel: 2}", "millis must be positive", None, "burn_cpu"),
    ("- burn_cpu: {millis: 5, parallel: -1}", "parallel cannot be negative", "-1", "burn_cpu"),
    ("- ping: {millis: 5}", "takes no millis or parallel", "5}", "ping"),
    ("- walk_ram: {key: ctx, parallel: 2}", "takes no millis or parallel", "2}", "walk_ram"),
    ("- fill_ram: {key: x, size: 1Mi, colour: red}", "field colour not found", "colour", "fill_ram"),
    ("- {ping: {}, walk_ram: {key: ctx}}", "single-key map", None, None),
    ("- ping", "single-key map", None, None),
    ("- ingest: {key: x, size: 2Gi}", "(2Gi - 1) limit of one ingest, which travels as an int32", "2Gi",
     "ingest"),
    ("- write_disk: {key: x, size: 3Gi}", "limit of one write_disk, which travels as an int32", "3Gi",
     "write_disk"),
    ("- churn_ram: {key: nope, size: 1Mi}", 'churn of RAM array "nope" before any fill_ram', "nope", "churn_ram"),
    ("- walk_ram: {key: repo}", 'walk of RAM array "repo" before any fill_ram', "repo", "walk_ram"),
    ("- read_disk_digest: {key: ctx}", 'read of "ctx" before any ingest or write_disk', "ctx",
     "read_disk_digest"),
    ("- read_disk_data: {key: later}", 'read of "later" before any ingest or write_disk', "later",
     "read_disk_data"),
    ("- burn_cpu: {millis: 1.5}", 'millis: expected a whole number, got "1.5"', "1.5", "burn_cpu"),
    ('- burn_cpu: {millis: "500"}', 'millis: expected a whole number, got "500"', '"500"', "burn_cpu"),
    ("- burn_cpu: {millis: 5, parallel: 3000000000}", "parallel: 3000000000 does not fit in int32", "3000",
     "burn_cpu"),
    ("- fill_ram: {key: x, size: 1Mi, key: y}", 'mapping key "key" already defined at line 14', "key: y",
     "fill_ram"),
    ("- fill_ram: [x, 1Mi]", "arguments must be a mapping", "[", "fill_ram"),
]


@pytest.mark.parametrize(("op", "fragment", "anchor", "kind"), OP_CASES, ids=[c[1][:40] for c in OP_CASES])
def test_op_rules_name_line_column_step_and_op(op, fragment, anchor, kind):
    error = rejected(with_op(op))
    # The op line starts at column 7 ("- "); its mapping, the default anchor, at column 9. A key used before its
    # array or file exists is pointed at where the key is written.
    column = 9 if anchor is None else 7 + op.index(anchor)
    assert fragment in str(error)
    assert (error.path, error.line, error.column) == ("scripts/t.yaml", 14, column)
    assert error.step == "s2" and error.step_number == 2
    assert error.op_index == 0 and error.op_number == 1
    assert error.op_kind == kind
    shown = f" ({kind})" if kind else ""
    assert str(error.first).startswith(f'scripts/t.yaml:14:{column}: step "s2" op 1{shown}: ')


def test_message_reads_path_line_col_step_op_and_rule():
    error = rejected(with_op("- read_disk_digest: {key: repo2}"))
    assert str(error) == ('scripts/t.yaml:14:33: step "s2" op 1 (read_disk_digest): '
                          'read of "repo2" before any ingest or write_disk')


def test_fill_earlier_in_the_same_step_counts_but_later_does_not():
    ok = with_op("- fill_ram: {key: fresh, size: 1Mi}\n      - churn_ram: {key: fresh, size: 1Mi}")
    assert decode(ok).steps[1].ops[1].key == "fresh"
    error = rejected(with_op("- walk_ram: {key: late}\n      - fill_ram: {key: late, size: 1Mi}"))
    assert "walk of RAM array" in str(error) and error.line == 14 and error.op_index == 0


def test_ram_and_disk_keys_are_separate_namespaces():
    assert "before any ingest or write_disk" in str(rejected(with_op("- read_disk_data: {key: ctx}")))
    assert "before any fill_ram" in str(rejected(with_op("- churn_ram: {key: repo, size: 1Mi}")))


STEP_CASES = [
    ("    think: 2s", "    think: 2d", 'think: unknown unit "d" in duration "2d"', 12, 12),
    ("    think: 2s", "    think: 0s", "think time must be positive", 12, 12),
    ("    think: 2s", "    think: -1s", "think time must be positive", 12, 12),
    ("    think: 2s", "    think: 5", 'think: missing unit in duration "5"', 12, 12),
    ("    think: 2s", "    think: .s", 'think: invalid duration ".s"', 12, 12),
    ("    think: 2s", "    think: 1.5.5s", 'think: missing unit in duration "1.5.5s"', 12, 12),
    ("    think: 2s\n", "", "think time must be positive", 10, 5),
    ("  - name: s2", "  - name: s1", "duplicate step name (also step 1)", 10, 11),
    ("    agent: b\n", "", "name and agent must be set (agent missing)", 10, 5),
    ("    agent: b", '    agent: ""', "name and agent must be set", 10, 5),
    ("    ops:\n      - OP\n", "    ops: []\n", "has no ops", 13, 10),
    ("    ops:\n      - OP\n", "    ops:\n", "has no ops", 13, 9),
    ("    agent: b", "    agent: b\n    colour: blue", "field colour not found in step", 12, 5),
    ("    ops:\n      - OP\n", "    ops: {ping: {}}\n", "ops: expected a list", 13, 10),
]


@pytest.mark.parametrize(("old", "new", "fragment", "line", "column"), STEP_CASES,
                         ids=[c[2][:40] for c in STEP_CASES])
def test_step_rules_name_line_and_step(old, new, fragment, line, column):
    text = with_op("- ping: {}").replace(old.replace("- OP", "- ping: {}"), new, 1)
    error = rejected(text)
    assert fragment in str(error)
    assert (error.line, error.column) == (line, column)
    assert error.step_number == 2
    assert error.step in ("s2", "s1")
    assert error.op_index is None


SCRIPT_CASES = [
    ("name: t", "name: Bad_Name", 'script name "Bad_Name" must match ^[a-z0-9][a-z0-9-]*$', 1, 7),
    ("name: t", "name: -t", 'script name "-t" must match', 1, 7),
    ("min_actor_memory: 1Gi", "min_actor_memory: 1Mi", 'script "t": min_actor_memory 1Mi is below the '
     "declared RAM 1Mi + disk 1Mi", 2, 19),
    ("min_actor_memory: 1Gi\n", "", 'script "t": min_actor_memory is required (declared RAM 1Mi + disk 1Mi)', 1, 1),
    ("min_actor_memory: 1Gi", "min_actor_memory: 1.5", 'min_actor_memory: "1.5" is not a positive whole', 2, 19),
    ("name: t", "name: t\nowner: me", "field owner not found in script", 2, 1),
    ("name: t", "name: t\nname: u", 'mapping key "name" already defined at line 1', 2, 1),
]


@pytest.mark.parametrize(("old", "new", "fragment", "line", "column"), SCRIPT_CASES,
                         ids=[c[2][:40] for c in SCRIPT_CASES])
def test_script_rules_name_line(old, new, fragment, line, column):
    error = rejected(with_op("- ping: {}").replace(old, new, 1))
    assert fragment in str(error)
    assert (error.line, error.column) == (line, column)
    assert error.step is None and error.op_index is None


def test_steps_must_be_a_list():
    error = rejected("name: t\nmin_actor_memory: 1Gi\nsteps: hello\n")
    assert 'steps: expected a list, got a scalar "hello"' in str(error) and (error.line, error.column) == (3, 8)


def test_no_steps():
    error = rejected("name: t\nmin_actor_memory: 1Gi\nsteps: []\n")
    assert 'script "t" has no steps' in str(error) and (error.line, error.column) == (3, 8)


@pytest.mark.parametrize(("text", "fragment", "line"), [
    ("name: t\nsteps: [\n", "invalid YAML", 3),
    ("name: t\n  bad: indent\n", "invalid YAML", 2),
    ("", "the document is empty", 1),
    ("# only a comment\n", "the document is empty", 1),
    ("name: a\n---\nname: b\n", "exactly one YAML document", 3),
    ("- just\n- a list\n", "a script is a mapping", 1),
    ("name: t\nmin_actor_memory: 1Gi\nsteps:\n  - just a string\n", "a step is a mapping", 4),
])
def test_documents_that_are_not_scripts(text, fragment, line):
    error = rejected(text)
    assert fragment in str(error)
    assert error.line == line


def test_every_problem_is_reported_not_only_the_first():
    text = with_op("- ping: {key: x}").replace("think: 2s", "think: 2d").replace("name: t", "name: T_")
    error = rejected(text)
    messages = [problem.message for problem in error.problems]
    assert any("unknown unit" in m for m in messages)
    assert any("takes no key" in m for m in messages)
    assert len(str(error).splitlines()) == len(error.problems) >= 2


def test_bytes_that_are_not_utf8():
    error = rejected(b"name: \xff\xfe\n")
    assert "not UTF-8" in str(error) and error.path == "scripts/t.yaml"


def test_text_with_a_lone_surrogate():
    """A str no file could hold (hypothesis found one): refused in one line, not a UnicodeEncodeError from libyaml."""
    error = rejected("\ud800 name: t\n")
    assert "not UTF-8 text: surrogates not allowed at character 0" in str(error)
    assert error.path == "scripts/t.yaml"


def test_a_valid_variant_decodes():
    script = decode(with_op("- burn_cpu: {millis: 5}"))
    op = script.steps[1].ops[0]
    assert (op.kind.value, op.millis, op.parallel, op.key, op.size) == ("burn_cpu", 5, 1, None, None)
