"""A trial's child processes run workload code: a real actor host starts without the object store's keys, a
database password or the shared warehouse's connection string, and with the project's own settings."""

import asyncio
from pathlib import Path

from substrate_assets.processes.child_env import child_environment
from substrate_assets.runtime.hosts import spawn_host

SECRETS = {"AWS_SECRET_ACCESS_KEY": "not-for-children", "AWS_ACCESS_KEY_ID": "AKIA-not-for-children",
           "PGPASSWORD": "not-for-children", "GITHUB_TOKEN": "not-for-children",
           "SUBSTRATE_BENCH_WAREHOUSE": "ducklake:postgres:dbname=lake password=not-for-children"}
KEPT = {"PATH": "/usr/bin", "SUBSTRATE_BENCH_ROOT": "/project", "LANG": "C.UTF-8"}


def test_secrets_are_left_out_and_the_rest_kept():
    assert child_environment({"PYTHONUNBUFFERED": "1"}, {**SECRETS, **KEPT}) == {**KEPT, "PYTHONUNBUFFERED": "1"}


def test_a_real_actor_host_does_not_inherit_them(tmp_path, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(tmp_path))

    async def host_environment() -> dict[str, str]:
        host = await spawn_host(tmp_path / "host.log", ready_timeout=60)
        try:
            raw = (await asyncio.to_thread(Path(f"/proc/{host.pid}/environ").read_bytes)).split(b"\0")
        finally:
            await host.kill()
        return dict(entry.decode().split("=", 1) for entry in raw if b"=" in entry)

    seen = asyncio.run(host_environment())
    assert not set(SECRETS) & set(seen)
    assert seen["SUBSTRATE_BENCH_ROOT"] == str(tmp_path) and "SUBSTRATE_RUNTIME_PID" in seen
