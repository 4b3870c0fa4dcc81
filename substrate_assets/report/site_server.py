"""The benchmark site served on 127.0.0.1: the standard library's static file server, narrowed to what a site needs.

It answers GET and HEAD for files under the site's directory only: no directory listing (a folder's
``index.html`` or 404), no hidden file (the site's record of its pages), no path that leaves the directory (``..``,
a symbolic link pointing out), and only requests
addressed to this machine (``Host`` 127.0.0.1, localhost or [::1] with the port: a web page elsewhere cannot read it by
rebinding its own name to 127.0.0.1). Every page is built whole and swapped in (:mod:`.site`), so a request during a
rebuild gets the old page or the new one.
"""

from __future__ import annotations

import os
import threading
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from substrate_assets.processes.host_guard import is_local


class SiteHandler(SimpleHTTPRequestHandler):
    server_version = "substrate-bench-site"
    sys_version = ""

    def _refused(self) -> bool:
        address = self.server.server_address
        assert isinstance(address, tuple)  # a TCP server's (host, port)
        if not is_local(self.headers.get("Host"), address[1]):
            self.send_error(HTTPStatus.MISDIRECTED_REQUEST, "this server answers requests addressed to 127.0.0.1")
            return True
        root = Path(self.directory).resolve()
        try:
            path = Path(self.translate_path(self.path))
            inside = path.resolve().is_relative_to(root)
            hidden = any(part.startswith(".") for part in path.relative_to(self.directory).parts)
        except (OSError, ValueError):  # a name the file system cannot hold (a NUL), or not under the site
            inside, hidden = False, True
        if not inside or hidden:
            self.send_error(HTTPStatus.NOT_FOUND)
            return True
        return False

    def do_GET(self) -> None:
        if not self._refused():
            super().do_GET()

    def do_HEAD(self) -> None:
        if not self._refused():
            super().do_HEAD()

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        self.send_error(HTTPStatus.NOT_FOUND)
        return None

    def end_headers(self) -> None:
        # The pages are rebuilt after each load: a browser asks again rather than showing yesterday's verdicts.
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


class SiteServer:
    """The site's directory served on 127.0.0.1:``port`` (0: a free port) in a thread of its own."""

    def __init__(self, directory: Path, port: int = 0) -> None:
        self.directory = directory
        self._server = ThreadingHTTPServer(("127.0.0.1", port), partial(SiteHandler, directory=str(directory)))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="site-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> SiteServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> SiteServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
