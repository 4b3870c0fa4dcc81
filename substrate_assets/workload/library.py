"""Script files on disk: the project's ``scripts/`` library and single files."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from substrate_assets.workload.decode import MAX_DOCUMENT_BYTES, decode, size_problem
from substrate_assets.workload.errors import Position, ScriptError, ScriptNotFound, ScriptProblem
from substrate_assets.workload.model import Script, script_name_problem
from substrate_assets.workload.text import quote

SCRIPT_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class ScriptFile:
    """A loaded script with the exact bytes it came from."""

    path: Path
    script: Script
    text: str
    sha256: str


def display_path(path: Path) -> str:
    """The path as a user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_script_file(path: Path, *, expected_name: str | None = None) -> ScriptFile:
    """Read, decode and validate one file; ``expected_name`` also pins the script's ``name``.

    Raises :class:`ScriptError` (located at the file) for every problem,
    including an unreadable file.
    """
    try:
        data = read_document(path)
    except OSError as error:
        raise ScriptError(ScriptProblem(f"cannot read: {error.strerror or error}", path=display_path(path))) from None
    except ValueError as error:
        raise ScriptError(ScriptProblem(str(error), path=display_path(path))) from None
    return parse_script_file(path, data, expected_name=expected_name)


def read_document(path: Path) -> bytes:
    """The bytes of a YAML document file (a script, suites.yaml); a ValueError, before anything is read, when it is
    larger than MAX_DOCUMENT_BYTES. At most one byte past the cap is ever read, should the file grow meanwhile."""
    too_large = size_problem(path.stat().st_size, "the file")
    if too_large is None:
        with path.open("rb") as handle:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
        too_large = size_problem(len(data), "the file")
    if too_large is not None:
        raise ValueError(too_large)
    return data


def parse_script_file(path: Path, data: bytes, *, expected_name: str | None = None) -> ScriptFile:
    """Decode and validate the bytes read from ``path`` (as :func:`load_script_file`, for a caller that has read
    them already)."""
    shown = display_path(path)
    script = decode(data, shown)
    if expected_name is not None and script.name != expected_name:
        position = script.field_positions.get("name", Position(1, 1))
        raise ScriptError(ScriptProblem(
            f"script name {quote(script.name)} must equal its file name {quote(expected_name)} "
            f"(scripts are looked up as scripts/<name>.yaml)", path=shown, position=position))
    return ScriptFile(path, script, data.decode("utf-8"), hashlib.sha256(data).hexdigest())


@dataclass(frozen=True)
class ScriptLibrary:
    """The directory of named scripts (``scripts/<name>.yaml``)."""

    directory: Path

    def paths(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.iterdir() if p.suffix in SCRIPT_SUFFIXES and p.is_file())

    def names(self) -> list[str]:
        return [p.stem for p in self.paths()]

    def path_of(self, name: str) -> Path:
        """``scripts/<name>.yaml`` (or ``.yml``); a ScriptNotFound, which is also a FileNotFoundError, when the name
        is not a script name (nothing outside the directory is ever looked at) or no such file exists."""
        shown = display_path(self.directory)
        refused = script_name_problem(name)
        if refused is not None:
            raise ScriptNotFound(ScriptProblem(f"no such script: {refused}", path=shown))
        for suffix in SCRIPT_SUFFIXES:
            candidate = self.directory / f"{name}{suffix}"
            if candidate.is_file():
                return candidate
        have = ", ".join(self.names()) or "none"
        raise ScriptNotFound(ScriptProblem(f"no script {quote(name)} (have {have})", path=shown))

    def load(self, name: str) -> ScriptFile:
        return load_script_file(self.path_of(name), expected_name=name)

    def contains(self, path: Path) -> bool:
        return path.resolve().parent == self.directory.resolve()
