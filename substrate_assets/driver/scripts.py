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
from typing import Any

from substrate_assets.runtime.random_bytes import RandomStream
from substrate_assets.workload import Script, ScriptFile, ScriptLibrary
from substrate_assets.workload.library import parse_script_file
from substrate_assets.workload.model import Op, OpKind

DEFAULT_SCRIPT = "coding-session"


@dataclass(frozen=True)
class LoadedScript:
    """A script file as a session uses it: the file, and the random bytes its ingests send."""

    file: ScriptFile
    payload: bytes = field(repr=False)  # as long as the script's largest ingest
    # Each op's serialized call (driver/users/session.py's prepared_call), built on first use and shared by every
    # session of the script: the bytes an op sends depend on the op and the payload only.
    calls: dict[Op, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def script(self) -> Script:
        return self.file.script

    @property
    def sha256(self) -> str:
        return self.file.sha256

    @property
    def name(self) -> str:
        return self.file.script.name


class ScriptSource:
    def __init__(self, library: ScriptLibrary, name: str = "", file: str = "") -> None:
        self.library = library
        self.name = name or DEFAULT_SCRIPT
        self.file = file
        self._cache: dict[tuple[Path, str], LoadedScript] = {}
        self._lock = threading.Lock()

    def _path(self) -> tuple[Path, str | None]:
        if self.file:
            return Path(self.file), None
        return self.library.path_of(self.name), self.name

    def load(self) -> LoadedScript:
        """The current script; raises ScriptError (invalid) or FileNotFoundError (no such script)."""
        path, expected = self._path()
        data = path.read_bytes()
        cache_key = (path.resolve(), hashlib.sha256(data).hexdigest())
        with self._lock:
            cached = self._cache.get(cache_key)
        if cached is not None:
            return cached
        script_file = parse_script_file(path, data, expected_name=expected)
        largest = max((op.size or 0 for op in script_file.script.ops if op.kind is OpKind.INGEST), default=0)
        loaded = LoadedScript(script_file, RandomStream().chunk(largest) if largest else b"")
        with self._lock:
            self._cache[cache_key] = loaded
        return loaded
