"""Analysis over exact samples and across trials. No Dagster here."""
