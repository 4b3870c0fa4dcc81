"""The Dagster layer, by domain: ``scripts/``, ``trials/``, ``warehouse/`` (each its assets, checks, sensors and jobs,
assembled in its ``definitions.py``), over the shared partitions and resources. Thin: domain functions do the work."""
