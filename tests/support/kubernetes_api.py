"""An HTTP server on 127.0.0.1 standing in for a Kubernetes API server, for the official client.

No Kubernetes API server can run on this machine. This one answers GETs with recorded API JSON
(``routes``), accepts creations (echoing the object back, as the API does) and deletions, and records
every call, so tests can check what the real client sent and whether ``deploy/rbac.yaml`` allows it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

DATA = Path(__file__).resolve().parents[1] / "data" / "kubernetes"


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    query: dict[str, list[str]]
    body: dict[str, Any] | None

    def rbac(self) -> tuple[str, str, str | None]:
        """(verb, resource, namespace) as the API server's authorizer sees this call."""
        parts = self.path.strip("/").split("/")[2:]  # drop "api", "v1"
        namespace = None
        if parts[:1] == ["namespaces"] and len(parts) > 2:
            namespace, parts = parts[1], parts[2:]
        resource = parts[0] + (f"/{parts[2]}" if len(parts) > 2 else "")
        named = len(parts) > 1
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(self.method)
        if self.method == "GET":
            verb = "watch" if self.query.get("watch") == ["true"] else ("get" if named else "list")
        if self.method == "DELETE":
            verb = "delete" if named else "deletecollection"
        return verb or self.method.lower(), resource, namespace


def _status(code: int, reason: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status":
                       "Success" if code < 400 else "Failure", "reason": reason, "code": code}).encode()


class FakeKubernetesAPI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, str]] = {}
        self.missing: set[str] = set()  # paths whose DELETE answers 404
        self.refused: dict[str, int] = {}  # HTTP method -> the error status every such call gets
        self.calls: list[Call] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def requests(self) -> list[tuple[str, dict[str, list[str]]]]:
        """The GETs, as (path, query)."""
        return [(call.path, call.query) for call in self.calls if call.method == "GET"]

    def write_kubeconfig(self, path: Path) -> str:
        path.write_text(f"""\
apiVersion: v1
kind: Config
clusters: [{{name: test, cluster: {{server: "http://127.0.0.1:{self.server_address[1]}"}}}}]
contexts: [{{name: test, context: {{cluster: test, user: runner, namespace: benchmarking}}}}]
current-context: test
users: [{{name: runner, user: {{token: not-a-secret}}}}]
""")
        return str(path)


class _Handler(BaseHTTPRequestHandler):
    server: FakeKubernetesAPI

    def log_message(self, *args: Any) -> None:
        return

    def _record(self) -> Call:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        call = Call(self.command, url.path, parse_qs(url.query), body)
        self.server.calls.append(call)
        return call

    def _reply(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _refused(self, call: Call) -> bool:
        code = self.server.refused.get(call.method)
        if code is not None:
            self._reply(code, _status(code, "Refused"))
        return code is not None

    def do_GET(self) -> None:
        call = self._record()
        if self._refused(call):
            return
        code, name = self.server.routes.get(call.path, (404, "forbidden.json"))
        self._reply(code, (DATA / name).read_bytes())

    def do_POST(self) -> None:
        call = self._record()
        if self._refused(call):
            return
        created = {**(call.body or {}), "status": {}}
        self._reply(201, json.dumps(created).encode())

    def do_DELETE(self) -> None:
        call = self._record()
        if self._refused(call):
            return
        if call.path in self.server.missing:
            self._reply(404, _status(404, "NotFound"))
        else:
            self._reply(200, _status(200, "Deleted"))


def serve(tmp_path: Path) -> Iterator[FakeKubernetesAPI]:
    """A running server with a kubeconfig for it at ``server.kubeconfig`` (for a pytest fixture)."""
    server = FakeKubernetesAPI()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
