"""The run store: trial directories, atomic writes, manifests, and readers for every result file. No Dagster."""
