"""The warehouse in Dagster: raw tables per trial, one asset per SQL model with its column tests as checks, the
refresh sensor, and the one way every load is reported."""
