"""Fault injection: real processes, real signals, hostile input; each test names the fault it drives."""
