"""Processes: who owns one (``owner``), the signals that stop one (``stop_signals``), a child that dies with its
parent (``parent_death``), and the sweep of directories whose owner is gone (``leftovers``).

The bottom layer: the runtime, the driver, the command line and the Dagster layer all use it, and it imports none
of them.
"""
