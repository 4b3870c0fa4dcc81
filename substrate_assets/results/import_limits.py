"""How much one import takes: a module of its own, so the command line reads it without importing the importer."""

# Runs one import takes unless told otherwise: each is read whole twice and copied, so a root of a hundred thousand
# (a bucket's whole history, or a directory tree made to stall the machine) is refused before anything is copied.
MAX_RUNS = 10_000
