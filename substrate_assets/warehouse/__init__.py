"""The warehouse: raw trial tables and a small dbt-like runner for SQL models, on one DuckDB file. No Dagster."""
