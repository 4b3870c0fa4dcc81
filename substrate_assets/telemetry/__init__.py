"""Server telemetry: the steady-state window, the server_summary structure and its 45 flat keys. No Dagster."""
