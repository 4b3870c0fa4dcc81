"""The Dagster-facing layer: assets, checks, partitions, sensors and resources over the domain packages."""
