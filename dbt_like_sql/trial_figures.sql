-- The headline figures of each trial in long form, one row per trial and figure, each figure declared once, here, on
-- its own line: its name, the mart and column it is read from, its unit, which way it improves (better) and how a
-- verdict judges a change of it (kind: latency, share, density, failure_ratio). metric_history (and so the change
-- points and the noise floor) and the comparisons' per-trial figures (densities, capacity) read it. A figure a trial
-- did not measure is NULL (its mart row says so); a trial without a row in a figure's mart has no row for it.
-- Adding a headline figure is one line here: metric_history, change_points, noise_floor, compare's figure list and
-- the trial's check in Dagster follow. (A new kind of figure also needs its threshold: analysis/thresholds.py.)
SELECT trial_id, 'wake_gmean_ms' AS figure, CAST(gmean_ms AS DOUBLE) AS value, 'ms' AS unit, 'lower' AS better, 'latency' AS kind FROM wake_latency_distribution
UNION ALL SELECT trial_id, 'wake_p50_ms', CAST(p50_ms AS DOUBLE), 'ms', 'lower', 'latency' FROM wake_latency_distribution
UNION ALL SELECT trial_id, 'wake_p99_ms', CAST(p99_ms AS DOUBLE), 'ms', 'lower', 'latency' FROM wake_latency_distribution
UNION ALL SELECT trial_id, 'wake_slow_share', CAST(slow_share AS DOUBLE), 'share', 'lower', 'share' FROM wake_latency_distribution
UNION ALL SELECT trial_id, 'actors_per_node', CAST(actors_per_node AS DOUBLE), 'actors', 'higher', 'density' FROM density_frontiers
UNION ALL SELECT trial_id, 'actors_per_vcpu', CAST(actors_per_vcpu AS DOUBLE), 'actors/vCPU', 'higher', 'density' FROM density_frontiers
UNION ALL SELECT trial_id, 'actors_per_gb_ram', CAST(actors_per_gb_ram AS DOUBLE), 'actors/GiB', 'higher', 'density' FROM density_frontiers
UNION ALL SELECT trial_id, 'capacity_users', CAST(capacity_users AS DOUBLE), 'users', 'higher', 'density' FROM slo_capacity
UNION ALL SELECT trial_id, 'failure_ratio', CAST(aggregate_failure_ratio AS DOUBLE), 'ratio', 'lower', 'failure_ratio' FROM density_frontiers
