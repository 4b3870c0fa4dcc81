"""The code version a local trial records: this checkout's commit, and which uncommitted changes it ran with."""

import subprocess

from substrate_assets.project import code_version


def git(root, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_a_commit_and_its_uncommitted_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(tmp_path))
    assert code_version() is None  # not a checkout: not guessed
    git(tmp_path, "init", "-q")
    (tmp_path / "runtime.py").write_text("a = 1\n")
    git(tmp_path, "add", "runtime.py")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    commit = git(tmp_path, "rev-parse", "HEAD")
    assert code_version() == commit
    (tmp_path / "untracked.txt").write_text("not part of the code\n")
    assert code_version() == commit
    (tmp_path / "runtime.py").write_text("a = 2\n")
    first = code_version()
    (tmp_path / "runtime.py").write_text("a = 3\n")
    second = code_version()
    assert first is not None and second is not None
    assert first.startswith(f"{commit}-dirty-") and second.startswith(f"{commit}-dirty-") and first != second
    (tmp_path / "runtime.py").write_text("a = 2\n")
    assert code_version() == first  # the same changes, the same version
