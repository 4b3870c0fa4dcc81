"""Which script a session starts with, resolved at every session start and cached by content.

Precedence: ``--agentsession-script-file`` (a path) > ``--agentsession-script``
(a name in the script library) > ``coding-session``. Loads are cached by
(source, sha256 of the bytes), so a rewritten file is a new script; a failed
load is reported every time and never replaces what was cached.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path

from substrate_assets.runtime.random_bytes import RandomStream
from substrate_assets.workload import Script, ScriptLibrary, decode
from substrate_assets.workload.library import display_path
from substrate_assets.workload.model import OpKind

DEFAULT_SCRIPT = "coding-session"


@dataclass(frozen=True)
class LoadedScript:
    script: Script
    sha256: str
    source: str
    payload: bytes = field(repr=False)  # random bytes, as long as the script's largest ingest

    @property
    def name(self) -> str:
        return self.script.name


class ScriptSource:
    def __init__(self, library: ScriptLibrary, name: str = "", file: str = "") -> None:
        self.library = library
        self.name = name or DEFAULT_SCRIPT
        self.file = file
        self._cache: dict[tuple[str, str], LoadedScript] = {}
        self._lock = threading.Lock()

    def _path(self) -> tuple[Path, str | None]:
        if self.file:
            return Path(self.file), None
        return self.library.path_of(self.name), self.name

    def load(self) -> LoadedScript:
        """The current script; raises ScriptError (invalid) or FileNotFoundError (no such script)."""
        path, expected = self._path()
        data = path.read_bytes()
        sha256 = hashlib.sha256(data).hexdigest()
        source = str(path.resolve())
        with self._lock:
            cached = self._cache.get((source, sha256))
        if cached is not None:
            return cached
        script = decode(data, display_path(path))
        if expected is not None and script.name != expected:
            raise FileNotFoundError(f"{display_path(path)} holds script {script.name!r}, not {expected!r}")
        largest = max((op.size or 0 for op in script.ops if op.kind is OpKind.INGEST), default=0)
        loaded = LoadedScript(script, sha256, source, RandomStream().chunk(largest) if largest else b"")
        with self._lock:
            self._cache[(source, sha256)] = loaded
        return loaded
