"""The type checker holds every module of the package (pyproject.toml's [tool.mypy]): no override waives a module's
errors, and each `# type: ignore` in the package names the error it silences and says why on its line."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<rest>.*)$")
# An error code in brackets, then a comment that says why.
JUSTIFIED = re.compile(r"^\[[a-z0-9_-]+(,\s*[a-z0-9_-]+)*\]\s*#\s*\S")


def test_no_override_waives_a_modules_errors():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True and config["files"] == ["substrate_assets"]
    waived = [override["module"] for override in config.get("overrides", [])
              if override.get("ignore_errors") or override.get("follow_imports") == "skip"]
    assert waived == []
    # Only libraries without types may be Any, never a module of the package.
    untyped = [name for override in config.get("overrides", []) if override.get("ignore_missing_imports")
               for name in override["module"]]
    assert untyped and not any(name.startswith("substrate_assets") for name in untyped)


def unjustified_ignores(text: str) -> list[int]:
    """The lines of ``text`` whose `# type: ignore` names no error code or gives no reason."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = IGNORE.search(line)
        if match and not JUSTIFIED.match(match.group("rest").strip()):
            found.append(number)
    return found


def test_every_ignore_names_its_error_and_says_why():
    unjustified = {str(path.relative_to(ROOT)): lines for path in sorted((ROOT / "substrate_assets").rglob("*.py"))
                   if (lines := unjustified_ignores(path.read_text()))}
    assert unjustified == {}


def test_an_ignore_without_a_code_or_a_reason_is_found():
    assert unjustified_ignores("x = f()  # type: ignore\n"
                               "y = g()  # type: ignore[arg-type]\n"
                               "z = h()  # type: ignore[arg-type]  # h's stub is wrong\n"
                               "w = k()  # type: ignore[misc, no-untyped-call]  # k comes from a generated module\n"
                               ) == [1, 2]
