"""A TCP port on 127.0.0.1 for a server a test starts and must name before it binds (a scrape target, the UI)."""

import os
import random
import socket

# Below the kernel's ephemeral range (32768-60999 by default), from which outgoing connections and bind(0) take their
# ports: a port picked there can be taken by some connection before the server binds it. Each pytest-xdist worker
# picks from a slice of its own, so two workers never name the same port.
LOWEST, BEYOND = 20000, 32768


def free_port() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    span = (BEYOND - LOWEST) // workers
    first = LOWEST + int(worker) * span
    for port in random.sample(range(first, first + span), min(span, 500)):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between {first} and {first + span - 1} on 127.0.0.1")
