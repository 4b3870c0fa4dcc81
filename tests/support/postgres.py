"""A real PostgreSQL server (Debian's ``postgresql`` package) on 127.0.0.1 for tests, in a data directory of its
own, with a role that owns a database and a role that may only read it, both with passwords (libpq's
``PGPASSWORD``). PostgreSQL refuses to run as root, so as root it runs as the ``postgres`` user."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ports import free_port

REQUIRED = os.environ.get("SUBSTRATE_BENCH_REQUIRE_POSTGRESQL") == "1"
WRITER, READER, DATABASE = "lake_writer", "lake_reader", "lake"
# The deployment's own grants, run by psql as the deployment runs them, so the roles tested are the roles documented.
CATALOG_GRANTS = Path(__file__).resolve().parents[2] / "deploy" / "warehouse-catalog.sql"


def binaries() -> Path:
    """The directory of initdb, pg_ctl and psql."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl:
        return Path(pg_ctl).parent
    message = "PostgreSQL is not installed (Debian: apt-get install postgresql; make test installs it as root)"
    if REQUIRED:
        pytest.fail(message)
    pytest.skip(message)


@dataclass(frozen=True)
class Postgres:
    host: str
    port: int
    passwords: dict[str, str]
    bin_dir: Path
    sockets: Path

    def dsn(self, role: str, database: str = DATABASE) -> str:
        """libpq's key/value connection string for ``role``, without its password (that comes from PGPASSWORD)."""
        return f"dbname={database} host={self.host} port={self.port} user={role}"

    def new_database(self, name: str) -> str:
        """A database for another catalog, owned by the writer, whose tables the reader may only SELECT."""
        _grant(self.bin_dir, self.sockets, self.port, name)
        return name


def _grant(bin_dir: Path, sockets: Path, port: int, database: str) -> None:
    """``database`` created for the writer; the reader may SELECT whatever the writer's first attach creates in it
    (the catalog's tables), and nothing else."""
    _psql(bin_dir, sockets, port, [f"CREATE DATABASE {database} OWNER {WRITER}"], "postgres")
    _psql(bin_dir, sockets, port, [], database, script=CATALOG_GRANTS)


def _as_server_user(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def postgres_server() -> Iterator[Postgres]:
    """initdb, start, create the roles and the database; yield the server; stop it (immediately) and remove it."""
    bin_dir = binaries()
    root = Path(tempfile.mkdtemp(prefix="substrate-postgres-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    superuser_password = os.urandom(12).hex()
    (root / "pwfile").write_text(superuser_password + "\n")
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        for path in (root, sockets, root / "pwfile"):
            os.chown(path, account.pw_uid, account.pw_gid)
    port = free_port()
    log = root / "server.log"
    subprocess.run(_as_server_user([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                                    "--auth-local=trust", "--auth-host=scram-sha-256",
                                    f"--pwfile={root / 'pwfile'}"]),
                   check=True, capture_output=True, timeout=120)
    subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
                                    "-o", f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off",
                                    "start"]), check=True, capture_output=True, timeout=120)
    passwords = {WRITER: os.urandom(12).hex(), READER: os.urandom(12).hex()}
    try:
        _psql(bin_dir, sockets, port, [
            f"CREATE ROLE {WRITER} LOGIN PASSWORD '{passwords[WRITER]}'",
            f"CREATE ROLE {READER} LOGIN PASSWORD '{passwords[READER]}'",
        ], "postgres")
        _grant(bin_dir, sockets, port, DATABASE)
        yield Postgres("127.0.0.1", port, passwords, bin_dir, sockets)
    finally:
        subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w",
                                        "stop"]), capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


def _psql(bin_dir: Path, sockets: Path, port: int, statements: list[str], database: str,
          script: Path | None = None) -> None:
    """Each of ``statements``, then ``script`` (given on psql's stdin, which the server's user can always read), as
    the superuser in ``database``."""
    runs = [(["-c", statement], None) for statement in statements]
    if script is not None:
        runs.append((["-f", "-"], script.read_text()))
    for argument, given in runs:
        done = subprocess.run(_as_server_user([str(bin_dir / "psql"), "-h", str(sockets), "-p", str(port), "-U",
                                               "postgres", "-d", database, "-v", "ON_ERROR_STOP=1", *argument]),
                              input=given, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{argument[1]}: {done.stderr}"
