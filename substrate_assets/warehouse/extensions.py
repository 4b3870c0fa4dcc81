"""DuckDB's extensions from their pinned wheels (``duckdb-extension-*``), loaded by path: nothing is installed or
loaded from the network at run time, and a missing wheel is an error that names the package to install.

The wheels exist for one DuckDB version only (``pyproject.toml`` pins both); each keeps its binary at
``duckdb_extension_<name>/extensions/v<duckdb version>/<extension>.duckdb_extension``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb

from substrate_assets.warehouse.sql_literal import quoted

# The extension, and the package whose wheel carries it.
PACKAGES: dict[str, str] = {
    "ducklake": "duckdb_extension_ducklake",
    "postgres_scanner": "duckdb_extension_postgres_scanner",
    "httpfs": "duckdb_extension_httpfs",
}
# A connection that loads its extensions by path must never fetch one on its own. Its extensions come from the
# wheels in the project's environment (make setup installs them from uv.lock, checking their hashes); DuckDB's own
# check of their signatures reads and
# verifies ~100 MB of binaries again in every process (0.19 s of a lake connection's 0.2 s of loading), and adds
# nothing: whoever could change a file under site-packages could change DuckDB, or this code, as well. Nothing but
# :func:`load_extension` loads an extension here: a reader's SQL cannot (``sql`` refuses LOAD, and its connection is
# locked with external access off).
NO_AUTOLOAD: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False, "autoload_known_extensions": False,
    "allow_unsigned_extensions": True,
}


class ExtensionMissing(RuntimeError):
    """The wheel of a DuckDB extension is not installed for this DuckDB."""


def extension_path(name: str) -> Path:
    """Where the wheel of extension ``name`` keeps its binary for the DuckDB in use."""
    package = PACKAGES[name]
    spec = importlib.util.find_spec(package)
    wheel = package.replace("_", "-")
    if spec is None or not spec.submodule_search_locations:
        raise ExtensionMissing(f"DuckDB's {name} extension is not installed: the package {wheel}=={duckdb.__version__} "
                               "is missing (make setup installs it)")
    path = Path(next(iter(spec.submodule_search_locations))) / "extensions" / f"v{duckdb.__version__}" \
        / f"{name}.duckdb_extension"
    if not path.is_file():
        raise ExtensionMissing(f"{wheel} holds no {name} extension for DuckDB {duckdb.__version__} (looked for "
                               f"{path}); pin {wheel} to DuckDB's version")
    return path


def load_extension(connection: duckdb.DuckDBPyConnection, name: str) -> None:
    """Load extension ``name`` into ``connection`` from its wheel."""
    connection.execute(f"LOAD {quoted(str(extension_path(name)))}")
