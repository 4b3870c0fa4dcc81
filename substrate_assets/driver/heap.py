"""The Locust process's heap: large blocks freed are kept for the next request instead of returned to the OS.

An agent session moves tens of MiB per step (ingest bodies out, read_disk_data replies in, each parsed into a
protobuf message). With glibc's defaults a block above its adaptive mmap threshold is mapped for each request and
unmapped after it, and the heap's free top is handed back once it passes twice that threshold: every large reply
was read into fresh pages, each one a page fault (~12,000 per coding-session lap, a fifth of the driver's CPU).
A fixed 32 MiB threshold (glibc's largest) and a 512 MiB trim threshold keep those blocks in the heap for reuse;
the process holds at most what its busiest moment needed.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 512 << 20


def keep_freed_memory() -> bool:
    """Set the thresholds; False where the C library is not glibc (nothing changed)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
