"""Fast incompressible bytes for RAM arrays and files.

Glutton fills memory and files with random bytes so snapshots cannot be
compressed or deduplicated away. ``os.urandom`` manages ~0.5 GB/s here; an
AES-CTR keystream under a random key (``cryptography``, AES-NI) is ~6 GB/s and
just as incompressible, so filling 64Mi costs ~11 ms instead of ~140 ms.
"""

from __future__ import annotations

import os

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

CHUNK = 1 << 20
_ZEROS = bytes(CHUNK)


class RandomStream:
    """An endless stream of pseudo-random bytes; not thread-safe (one per caller)."""

    def __init__(self) -> None:
        self._encryptor = Cipher(algorithms.AES(os.urandom(32)), modes.CTR(os.urandom(16))).encryptor()

    def chunk(self, size: int = CHUNK) -> bytes:
        return self._encryptor.update(_ZEROS[:size] if size <= CHUNK else bytes(size))

    def fill(self, target: memoryview) -> None:
        """Overwrite ``target`` with random bytes."""
        offset = 0
        while offset < len(target):
            size = min(CHUNK, len(target) - offset)
            target[offset:offset + size] = self._encryptor.update(_ZEROS[:size])
            offset += size
