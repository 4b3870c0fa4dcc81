"""The warehouse in Dagster: raw tables per trial, the marts (one step; an asset per SQL model, its column tests as two
checks), the refresh sensor, and the one way every load is reported."""
