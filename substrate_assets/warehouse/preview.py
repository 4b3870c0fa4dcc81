"""How much of a table a load or a build shows with it (in its Dagster metadata, in the CLI's summary)."""

# A table's first rows, kept with each trial's load and each model's build: enough to recognise the data, small
# enough to record with every materialization.
PREVIEW_ROWS = 10
