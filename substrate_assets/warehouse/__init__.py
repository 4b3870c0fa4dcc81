"""The warehouse: raw trial tables and a small dbt-like runner for SQL models, in one DuckDB file or a shared
DuckLake. No Dagster."""
