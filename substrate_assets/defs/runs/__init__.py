"""Runs: who owns each run, whoever launched it (the command line, the UI, a sensor, a schedule), and the sweep that
fails runs whose owning process is gone and frees what they hold (pool slots, Pipes scratch directories)."""
