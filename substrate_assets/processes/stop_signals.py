"""The signals that ask a process to stop, and how a shell reports a command they stopped."""

from __future__ import annotations

import signal

# Ctrl-C, and the polite stop of ``kill``, service managers and the driver alike.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def exit_code(signum: int) -> int:
    """The shell's code for a command stopped by the signal: 128 + its number (130 SIGINT, 143 SIGTERM)."""
    return 128 + signum
