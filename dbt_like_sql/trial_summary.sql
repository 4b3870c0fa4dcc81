-- One row per trial with the reference's trial_summary keys: cluster facts, the run window,
-- metadata, multi_actor_worker (actors_per_pod_p50 > 1), the density frontier, and per-operation
-- failure ratios (`<operation>_failure_ratio` keys, from every named stats.csv row; null with no
-- requests); then what a local trial's driver cost over the steady window (null when not measured).
WITH operations AS (
    SELECT
        trial_id,
        trim(regexp_replace(lower(regexp_replace(regexp_replace(name, '([A-Z]+)([A-Z][a-z])', '\1_\2', 'g'),
                                                 '([a-z0-9])([A-Z])', '\1_\2', 'g')),
                            '[^a-z0-9]+', '_', 'g'), '_') || '_failure_ratio' AS operation,
        CASE WHEN request_count > 0 THEN py_round(failure_count / request_count, 4) END AS ratio
    FROM locust_stats
    WHERE name IS NOT NULL AND name <> '' AND name <> 'Aggregated'
),
ratios AS (
    SELECT trial_id, map_from_entries(list(struct_pack(k := operation, v := ratio) ORDER BY operation)) AS operation_failure_ratios
    FROM (SELECT trial_id, operation, any_value(ratio) AS ratio FROM operations GROUP BY ALL)
    GROUP BY trial_id
)
SELECT
    m.trial_id,
    f.machine_type,
    f.node_count,
    f.allocatable_cores,
    f.allocatable_ram_gb,
    f.worker_pod_count,
    f.gke_version,
    f.worker_actor_capacity,
    f.worker_memory_limit_gb,
    f.sandbox_class,
    f.run_start,
    f.run_end,
    m.metadata,
    CASE WHEN d.actors_per_pod_p50 IS NULL THEN NULL ELSE d.actors_per_pod_p50 > 1 END AS multi_actor_worker,
    d.actors_per_node,
    d.actors_per_vcpu,
    d.actors_per_gb_ram,
    d.actors_per_pod_p50,
    d.actors_per_pod_p90,
    d.actors_per_pod_p99,
    d.aggregate_failure_ratio,
    r.operation_failure_ratios,
    m.driver_cpu_s,
    m.driver_core_share,
    m.machine_cpu_saturation
FROM trial_manifests AS m
LEFT JOIN cluster_facts AS f USING (trial_id)
LEFT JOIN density_frontiers AS d USING (trial_id)
LEFT JOIN ratios AS r USING (trial_id)
ORDER BY m.trial_id
