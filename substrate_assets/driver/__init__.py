"""The agent-session load driver on Locust, its knobs, and the trial runner. No Dagster here."""
