"""`substrate-bench validate`: tables for valid scripts, file:line:col lines and exit 1 for broken ones."""

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from substrate_assets.cli import main

ROOT = Path(__file__).resolve().parents[2]
BROKEN = """\
name: broken
min_actor_memory: 1Gi
steps:
  - name: 01_start
    agent: starts
    think: 1s
    ops:
      - ping: {}
  - name: 02_clone_repo
    agent: clones
    think: 2s
    ops:
      - ping: {}
      - read_disk_digest: {key: repo}
"""


def invoke(*args: str):
    return CliRunner(env={"COLUMNS": "200"}).invoke(main, ["validate", *args])


def test_default_validates_the_library_and_prints_summaries():
    result = invoke()
    assert result.exit_code == 0, result.output
    for expected in ("coding-session", "quick-session", "96Mi", "98.5Mi", "1Gi", "69s", "44"):
        assert expected in result.output


def test_broken_file_exits_1_with_file_line_col_step_and_op(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    result = invoke(str(path))
    assert result.exit_code == 1
    assert result.stderr.strip().endswith(
        'broken.yaml:14:33: step "02_clone_repo" op 2 (read_disk_digest): '
        'read of "repo" before any ingest or write_disk')
    assert len(result.stderr.strip().splitlines()) == 1


def test_mixed_valid_and_invalid_prints_both_and_exits_1(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN.replace("think: 1s", "think: 1d"))
    result = invoke(str(ROOT / "scripts" / "quick-session.yaml"), str(path))
    assert result.exit_code == 1
    assert "quick-session" in result.stdout
    # Decoding problems are reported before (and instead of) the ordering rules they could confuse.
    assert result.stderr.strip().endswith(
        'broken.yaml:6:12: step "01_start": think: unknown unit "d" in duration "1d" '
        "(a Go duration such as 2s, 1.5s or 500ms)")


def test_usage_errors_exit_2(tmp_path):
    assert invoke(str(tmp_path / "missing.yaml")).exit_code == 2
    assert invoke(str(tmp_path)).exit_code == 2  # a directory without scripts
    assert CliRunner().invoke(main, ["validate", "--no-such-flag"]).exit_code == 2


def test_steps_table():
    result = invoke("--steps", str(ROOT / "scripts" / "coding-session.yaml"))
    assert result.exit_code == 0
    assert "06_first_build" in result.output and "burn_cpu 3s ×2" in result.output


def test_console_script_runs_as_a_process(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    executable = Path(sys.executable).parent / "substrate-bench"
    done = subprocess.run([str(executable), "validate", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert ":14:33: " in done.stderr


def test_every_command_is_found_by_its_name_and_imported_only_when_named():
    from substrate_assets.cli import COMMANDS

    listed = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["--help"])
    assert listed.exit_code == 0, listed.output
    for name in COMMANDS:
        assert f"  {name} " in listed.output
        assert CliRunner().invoke(main, [name, "--help"]).exit_code == 0
    # `sql` and `import` start without the suites, the runtime or Dagster: a fresh interpreter shows what they load.
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom substrate_assets.cli import main\n"
         "try:\n    main(['sql', '--help'])\nexcept SystemExit:\n    pass\n"
         "print(sorted(m for m in sys.modules if m.startswith(('substrate_assets.suites', 'substrate_assets.runtime',"
         " 'substrate_assets.cli.trials', 'dagster'))))"],
        capture_output=True, text=True, cwd=ROOT, check=True)
    assert loaded.stdout.strip().splitlines()[-1] == "[]", loaded.stdout
