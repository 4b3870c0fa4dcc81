-- Density frontier per trial. A trial that wrote its own trial_summary row (upstream's runner, or ours)
-- is reported with that row's figures (figures_from = 'trial_summary'), never overwritten; every trial's
-- figures are also recomputed here (recomputed_*), and frontier_mismatch says whether a recomputed figure
-- differs from the run's own (null when the run reported none; a figure that cannot be recomputed is null
-- and no mismatch).
-- Recomputation, by the reference's formulas: peak users are the largest observed User Count (the
-- configured users only when nothing was observed), times actors per user (null when the run does not
-- say: never a default); actors per node, vCPU and GiB of allocatable RAM round to 2 dp and are null when
-- the denominator is null or 0. Actors per worker pod are taken at every observed sample (4 dp), then
-- floor-index p50/p90/p99 (2 dp). The aggregate failure ratio is the Aggregated row's failures over
-- requests (4 dp), null without requests. Rounding is Python's, as the reference's.
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
        coalesce(o.peak, m.users::DOUBLE) * m.actors_per_user AS peak_actors,
        m.actors_per_user AS per_user,
        o.samples,
        f.node_count,
        f.allocatable_cores,
        f.allocatable_ram_gb,
        f.worker_pod_count,
        coalesce(f.has_trial_summary, false) AS reported,
        f.reported_actors_per_node,
        f.reported_actors_per_vcpu,
        f.reported_actors_per_gb_ram,
        f.reported_actors_per_pod_p50,
        f.reported_actors_per_pod_p90,
        f.reported_actors_per_pod_p99,
        f.reported_aggregate_failure_ratio
    FROM trial_manifests AS m
    LEFT JOIN observed AS o USING (trial_id)
    LEFT JOIN cluster_facts AS f USING (trial_id)
    -- A trial in which no session ever started measured nothing: it has no frontier.
    WHERE m.sessions_started IS DISTINCT FROM 0
),
per_pod AS (
    SELECT
        trial_id,
        CASE
            WHEN samples IS NULL OR per_user IS NULL OR worker_pod_count IS NULL OR worker_pod_count = 0 THEN NULL
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
),
recomputed AS (
    SELECT
        b.*,
        CASE WHEN b.node_count > 0 THEN py_round(b.peak_actors / b.node_count, 2) END AS recomputed_actors_per_node,
        CASE WHEN b.allocatable_cores > 0 THEN py_round(b.peak_actors / b.allocatable_cores, 2) END
            AS recomputed_actors_per_vcpu,
        CASE WHEN b.allocatable_ram_gb > 0 THEN py_round(b.peak_actors / b.allocatable_ram_gb, 2) END
            AS recomputed_actors_per_gb_ram,
        py_round(floor_index(p.ratios, 500), 2) AS recomputed_actors_per_pod_p50,
        py_round(floor_index(p.ratios, 900), 2) AS recomputed_actors_per_pod_p90,
        py_round(floor_index(p.ratios, 990), 2) AS recomputed_actors_per_pod_p99,
        a.aggregate_failure_ratio AS recomputed_aggregate_failure_ratio
    FROM base AS b
    LEFT JOIN per_pod AS p USING (trial_id)
    LEFT JOIN aggregated AS a USING (trial_id)
)
SELECT
    trial_id,
    peak_users,
    CASE WHEN reported THEN reported_actors_per_node ELSE recomputed_actors_per_node END AS actors_per_node,
    CASE WHEN reported THEN reported_actors_per_vcpu ELSE recomputed_actors_per_vcpu END AS actors_per_vcpu,
    CASE WHEN reported THEN reported_actors_per_gb_ram ELSE recomputed_actors_per_gb_ram END AS actors_per_gb_ram,
    CASE WHEN reported THEN reported_actors_per_pod_p50 ELSE recomputed_actors_per_pod_p50 END AS actors_per_pod_p50,
    CASE WHEN reported THEN reported_actors_per_pod_p90 ELSE recomputed_actors_per_pod_p90 END AS actors_per_pod_p90,
    CASE WHEN reported THEN reported_actors_per_pod_p99 ELSE recomputed_actors_per_pod_p99 END AS actors_per_pod_p99,
    CASE WHEN reported THEN reported_aggregate_failure_ratio ELSE recomputed_aggregate_failure_ratio END
        AS aggregate_failure_ratio,
    CASE WHEN reported THEN 'trial_summary' ELSE 'recomputed' END AS figures_from,
    recomputed_actors_per_node,
    recomputed_actors_per_vcpu,
    recomputed_actors_per_gb_ram,
    recomputed_actors_per_pod_p50,
    recomputed_actors_per_pod_p90,
    recomputed_actors_per_pod_p99,
    recomputed_aggregate_failure_ratio,
    -- A figure mismatches when it was recomputed and is not the run's own.
    CASE WHEN reported THEN
        (recomputed_actors_per_node IS NOT NULL
            AND recomputed_actors_per_node IS DISTINCT FROM reported_actors_per_node)
        OR (recomputed_actors_per_vcpu IS NOT NULL
            AND recomputed_actors_per_vcpu IS DISTINCT FROM reported_actors_per_vcpu)
        OR (recomputed_actors_per_gb_ram IS NOT NULL
            AND recomputed_actors_per_gb_ram IS DISTINCT FROM reported_actors_per_gb_ram)
        OR (recomputed_actors_per_pod_p50 IS NOT NULL
            AND recomputed_actors_per_pod_p50 IS DISTINCT FROM reported_actors_per_pod_p50)
        OR (recomputed_actors_per_pod_p90 IS NOT NULL
            AND recomputed_actors_per_pod_p90 IS DISTINCT FROM reported_actors_per_pod_p90)
        OR (recomputed_actors_per_pod_p99 IS NOT NULL
            AND recomputed_actors_per_pod_p99 IS DISTINCT FROM reported_actors_per_pod_p99)
        OR (recomputed_aggregate_failure_ratio IS NOT NULL
            AND recomputed_aggregate_failure_ratio IS DISTINCT FROM reported_aggregate_failure_ratio)
    END AS frontier_mismatch
FROM recomputed
ORDER BY trial_id
