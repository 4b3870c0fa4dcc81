-- The capacity history of each configuration: one row per trial of slo_capacity, with the configuration it ran
-- (script_sha256, the script's content hash; sandbox_class; lifecycle_mode; actor_memory; machine_type) and the
-- question it was asked (the SLO's two thresholds, the think scale that sets each session's pace, the ladder whose
-- points capacity is one of, and the load: node_count, users, actors_per_user, duration_s), so a change in capacity
-- or density can be told from a change in what was measured or how. The
-- version of the system under test (sut_version) is a column but not part of the configuration: a configuration's
-- history runs across versions, which is how a version that changed a figure shows (compare, change_points).
-- configuration is a short stable id of those values: the first 12 hex digits of the md5 of their JSON object (keys in
-- that order, a missing value written null, so trials missing the same values group together; a wake delay injected
-- into the embedded runtime is appended to that JSON as ` inject_wake_delay_ms=<ms>`, so such trials are a
-- configuration of their own while every other trial keeps its id). trial_number counts
-- the suite's trials of the configuration 1, 2, ... by started_at (a trial without one last), then trial_id: a suite
-- and configuration is one series.
-- previous_capacity_users is the capacity of the configuration's previous trial, and capacity_change_users this
-- trial's capacity minus it: null when either is null (a trial without capacity is no baseline to compare with, and
-- its reason is in capacity_null_because).
WITH configured AS (
    SELECT
        c.trial_id,
        c.suite,
        m.started_at,
        m.script_sha256,
        f.sandbox_class,
        m.lifecycle_mode,
        m.actor_memory,
        m.sut_version,
        f.machine_type,
        c.slo_wake_p99_ms,
        c.slo_failure_ratio,
        m.think_scale,
        m.ladder,
        f.node_count,
        m.users,
        m.actors_per_user,
        m.duration_s,
        m.inject_wake_delay_ms,
        c.capacity_users,
        c.capacity_actors_per_node,
        c.capacity_actors_per_vcpu,
        c.capacity_actors_per_gb_ram,
        c.capacity_wake_p99_ms,
        c.capacity_null_because,
        c.knee_users,
        c.broken_by
    FROM slo_capacity AS c
    LEFT JOIN trial_manifests AS m USING (trial_id)
    LEFT JOIN cluster_facts AS f USING (trial_id)
),
identified AS (
    SELECT
        left(md5(CAST(to_json({
            'script_sha256': script_sha256,
            'sandbox_class': sandbox_class,
            'lifecycle_mode': lifecycle_mode,
            'actor_memory': actor_memory,
            'machine_type': machine_type,
            'slo_wake_p99_ms': slo_wake_p99_ms,
            'slo_failure_ratio': slo_failure_ratio,
            'think_scale': think_scale,
            'ladder': ladder,
            'node_count': node_count,
            'users': users,
            'actors_per_user': actors_per_user,
            'duration_s': duration_s
        }) AS VARCHAR) || coalesce(' inject_wake_delay_ms=' || inject_wake_delay_ms, '')), 12) AS configuration,
        *
    FROM configured
),
numbered AS (
    SELECT
        *,
        row_number() OVER configuration_trials AS trial_number,
        lag(trial_id) OVER configuration_trials AS previous_trial_id,
        lag(capacity_users) OVER configuration_trials AS previous_capacity_users
    FROM identified
    WINDOW configuration_trials AS (PARTITION BY suite, configuration ORDER BY started_at ASC NULLS LAST, trial_id)
)
SELECT
    configuration,
    script_sha256,
    sandbox_class,
    lifecycle_mode,
    actor_memory,
    sut_version,
    machine_type,
    slo_wake_p99_ms,
    slo_failure_ratio,
    think_scale,
    ladder,
    node_count,
    users,
    actors_per_user,
    duration_s,
    inject_wake_delay_ms,
    suite,
    trial_id,
    started_at,
    trial_number,
    capacity_users,
    capacity_actors_per_node,
    capacity_actors_per_vcpu,
    capacity_actors_per_gb_ram,
    capacity_wake_p99_ms,
    knee_users,
    broken_by,
    capacity_null_because,
    previous_trial_id,
    previous_capacity_users,
    capacity_users - previous_capacity_users AS capacity_change_users
FROM numbered
ORDER BY suite, configuration, trial_number
