"""What every asset says of itself in the catalog, beyond its own definition."""

# Who answers for the assets (Dagster takes a team or an email address).
OWNERS = ["team:substrate-bench"]
