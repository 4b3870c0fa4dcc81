"""Server telemetry, measured: the steady-state window, the Prometheus harvest and the embedded runtime's own
events, each written as a server_summary. No Dagster."""
