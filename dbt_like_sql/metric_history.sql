-- The history of each headline metric: one row per trial and metric the trial measured, in the order of its
-- configuration's trials (capacity_history's configuration and trial_number, and the trial's suite, started_at and
-- sut_version), the series change_points analyses. The metrics: wake_gmean_ms, wake_p50_ms and wake_p99_ms
-- (wake_latency_distribution, ms, lower is better), wake_slow_share (its share of wakes that waited for a cold host,
-- lower is better); actors_per_node, actors_per_vcpu and actors_per_gb_ram
-- (density_frontiers, higher is better); capacity_users (slo_capacity, higher is better); failure_ratio
-- (density_frontiers' aggregate_failure_ratio, lower is better). A figure that is null (or NaN, ±Inf) was not
-- measured and has no row: a series holds measurements only, never a value carried over from another trial. A trial
-- that did not run to its end (trial_manifests.completed false: stopped early) measured part of a run and is left
-- out; one whose end is unknown is kept. A disturbed trial (trial_manifests.disturbed: the machine was busy with other
-- work) is not a sample of its configuration and is left out too, from the noise floor and change points with it.
WITH metrics (metric, unit, better) AS (
    VALUES
        ('wake_gmean_ms', 'ms', 'lower'),
        ('wake_p50_ms', 'ms', 'lower'),
        ('wake_p99_ms', 'ms', 'lower'),
        ('wake_slow_share', 'share', 'lower'),
        ('actors_per_node', 'actors', 'higher'),
        ('actors_per_vcpu', 'actors/vCPU', 'higher'),
        ('actors_per_gb_ram', 'actors/GiB', 'higher'),
        ('capacity_users', 'users', 'higher'),
        ('failure_ratio', 'ratio', 'lower')
),
figures AS (
    SELECT trial_id, 'wake_gmean_ms' AS metric, CAST(gmean_ms AS DOUBLE) AS value FROM wake_latency_distribution
    UNION ALL
    SELECT trial_id, 'wake_p50_ms', CAST(p50_ms AS DOUBLE) FROM wake_latency_distribution
    UNION ALL
    SELECT trial_id, 'wake_p99_ms', CAST(p99_ms AS DOUBLE) FROM wake_latency_distribution
    UNION ALL
    SELECT trial_id, 'wake_slow_share', CAST(slow_share AS DOUBLE) FROM wake_latency_distribution
    UNION ALL
    SELECT trial_id, 'actors_per_node', CAST(actors_per_node AS DOUBLE) FROM density_frontiers
    UNION ALL
    SELECT trial_id, 'actors_per_vcpu', CAST(actors_per_vcpu AS DOUBLE) FROM density_frontiers
    UNION ALL
    SELECT trial_id, 'actors_per_gb_ram', CAST(actors_per_gb_ram AS DOUBLE) FROM density_frontiers
    UNION ALL
    SELECT trial_id, 'capacity_users', CAST(capacity_users AS DOUBLE) FROM slo_capacity
    UNION ALL
    SELECT trial_id, 'failure_ratio', CAST(aggregate_failure_ratio AS DOUBLE) FROM density_frontiers
)
SELECT
    h.suite,
    h.configuration,
    h.trial_id,
    h.started_at,
    h.trial_number,
    h.sut_version,
    f.metric,
    f.value,
    m.unit,
    m.better
FROM figures AS f
JOIN capacity_history AS h USING (trial_id)
JOIN trial_manifests AS t USING (trial_id)
JOIN metrics AS m USING (metric)
WHERE f.value IS NOT NULL AND isfinite(f.value) AND t.completed IS NOT FALSE AND t.disturbed IS NOT TRUE
ORDER BY h.suite, h.configuration, f.metric, h.trial_number
