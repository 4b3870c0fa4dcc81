-- Density frontier per trial, by the reference's formulas. Peak users are the largest observed
-- User Count (the configured users only when nothing was observed), times actors per user; actors
-- per node, vCPU and GiB of allocatable RAM round to 2 dp and are null when the denominator is null
-- or 0. Actors per worker pod are taken at every observed sample (4 dp), then floor-index
-- p50/p90/p99 (2 dp). The aggregate failure ratio is the Aggregated row's failures over requests
-- (4 dp), null without requests. Rounding is Python's, as the reference's.
WITH observed AS (
    SELECT trial_id, list(user_count) AS samples, max(user_count) AS peak
    FROM stats_history
    WHERE name IN ('', 'Aggregated', 'Total') AND user_count > 0
    GROUP BY trial_id
),
base AS (
    SELECT
        m.trial_id,
        coalesce(o.peak, m.users::DOUBLE) AS peak_users,
        coalesce(o.peak, m.users::DOUBLE) * coalesce(m.actors_per_user, 1) AS peak_actors,
        coalesce(m.actors_per_user, 1) AS per_user,
        o.samples,
        f.node_count,
        f.allocatable_cores,
        f.allocatable_ram_gb,
        f.worker_pod_count
    FROM trial_manifests AS m
    LEFT JOIN observed AS o USING (trial_id)
    LEFT JOIN cluster_facts AS f USING (trial_id)
),
per_pod AS (
    SELECT
        trial_id,
        CASE
            WHEN samples IS NULL OR worker_pod_count IS NULL OR worker_pod_count = 0 THEN NULL
            ELSE list_transform(samples, lambda u: py_round(u * per_user / worker_pod_count, 4))
        END AS ratios
    FROM base
),
aggregated AS (
    SELECT
        trial_id,
        CASE WHEN request_count > 0 THEN py_round(failure_count / request_count, 4) END AS aggregate_failure_ratio
    FROM locust_stats
    WHERE name = 'Aggregated'
)
SELECT
    b.trial_id,
    b.peak_users,
    CASE WHEN b.node_count > 0 THEN py_round(b.peak_actors / b.node_count, 2) END AS actors_per_node,
    CASE WHEN b.allocatable_cores > 0 THEN py_round(b.peak_actors / b.allocatable_cores, 2) END AS actors_per_vcpu,
    CASE WHEN b.allocatable_ram_gb > 0 THEN py_round(b.peak_actors / b.allocatable_ram_gb, 2) END
        AS actors_per_gb_ram,
    py_round(floor_index(p.ratios, 500), 2) AS actors_per_pod_p50,
    py_round(floor_index(p.ratios, 900), 2) AS actors_per_pod_p90,
    py_round(floor_index(p.ratios, 990), 2) AS actors_per_pod_p99,
    a.aggregate_failure_ratio
FROM base AS b
LEFT JOIN per_pod AS p USING (trial_id)
LEFT JOIN aggregated AS a USING (trial_id)
ORDER BY b.trial_id
