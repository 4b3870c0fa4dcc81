"""The Locust process keeps large freed blocks: the same large buffers allocated again fault no fresh pages."""

from __future__ import annotations

import subprocess
import sys

ROUNDS = """
import resource, sys
from substrate_assets.driver.heap import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "kept" else None
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for round in range(20):
    if round == 5:
        before = faults()
    # A step's buffers: a 24 MiB reply, its 24 MiB parsed copy and a 16 MiB one, all alive at once.
    reply = b"r" * (24 << 20)
    parsed = bytes(bytearray(reply))
    other = b"o" * (16 << 20)
    del reply, parsed, other
print(kept, (faults() - before) // 15)
"""


def faults_per_round(mode: str) -> tuple[str, int]:
    done = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True, check=True)
    kept, faults = done.stdout.split()
    return kept, int(faults)


def test_large_buffers_are_reused_instead_of_faulted_in_again():
    kept, faults = faults_per_round("kept")
    assert kept == "True"
    _, default_faults = faults_per_round("default")
    pages = (64 << 20) // 4096
    assert default_faults > pages // 2  # glibc's defaults: most of each round's pages are fresh
    assert faults < pages // 20
