-- One row per load point: each step of a ladder trial (a flat trial is a ladder of one point), over the step's
-- steady part only — the step's ramp cut by the reference's steady-window rule (users >= 0.9 x the step's peak)
-- applied inside the step, as load_steps holds it. users is the largest User Count Locust observed in that
-- window (null: none observed), actors = users x actors per user (null when the trial does not say), and actors
-- per node, vCPU and GiB of allocatable RAM are the density frontier's formulas at that load (2 dp, null without a
-- denominator). The wake figures are floor-index percentiles of the exact latencies of every wake
-- Locust counted (failed or not, as wake_latency_distribution's main figures) that started inside the window —
-- window_start_ts <= ts < window_end_ts + 1, since the history row stamped window_end_ts was written during that
-- second, still at the step's load; failure_ratio is failed over all requests that started in it (null without
-- requests). A trial without a request log (an imported upstream run) has no wake figures (null: not measured) and
-- counts its window's requests and failures from the stats history's running totals. complete says whether the step ran to its end (a stopped trial cuts its last step short; a flat
-- point is complete when its trial is); recorded, whether it is a ladder step (load_steps.json) rather than a
-- trial's one point. The 45 server-telemetry keys are those measured over the window (null: not measured). A
-- trial in which no session ever started has no load points.
WITH points AS (
    SELECT s.*, m.actors_per_user
    FROM load_steps AS s
    JOIN trial_manifests AS m USING (trial_id)
    WHERE m.sessions_started IS DISTINCT FROM 0
),
observed AS (
    SELECT p.trial_id, p.step, max(h.user_count) AS users
    FROM points AS p
    JOIN stats_history AS h
        ON h.trial_id = p.trial_id
        AND h.name IN ('', 'Aggregated', 'Total')
        AND h.user_count > 0
        AND h.timestamp BETWEEN p.window_start_ts AND p.window_end_ts
    GROUP BY p.trial_id, p.step
),
-- Trials that kept a request log: an upstream run imported has none, so its wake figures were not measured (null,
-- never 0) and its requests come from its stats history's cumulative totals instead.
logged AS (
    SELECT DISTINCT trial_id FROM request_samples
),
history_totals AS (
    -- The Aggregated row's running totals: what was counted by the window's end less what was counted by its start
    -- (null when no row precedes the window: the start's count is unknown).
    SELECT
        p.trial_id,
        p.step,
        max(h.total_request_count) FILTER (WHERE h.timestamp <= p.window_end_ts)
            - max(h.total_request_count) FILTER (WHERE h.timestamp <= p.window_start_ts) AS requests,
        max(h.total_failure_count) FILTER (WHERE h.timestamp <= p.window_end_ts)
            - max(h.total_failure_count) FILTER (WHERE h.timestamp <= p.window_start_ts) AS failed_requests
    FROM points AS p
    JOIN stats_history AS h
        ON h.trial_id = p.trial_id AND h.name IN ('', 'Aggregated', 'Total')
    WHERE p.trial_id NOT IN (SELECT trial_id FROM logged)
    GROUP BY p.trial_id, p.step
),
requests AS (
    SELECT
        p.trial_id,
        p.step,
        list_sort(list(r.latency_ms) FILTER (WHERE is_wake(r.wake, r.name) AND r.latency_ms IS NOT NULL)) AS wakes,
        count(r.name) FILTER (WHERE is_wake(r.wake, r.name) AND NOT r.success) AS wake_failed,
        count(r.name) AS requests,
        count(r.name) FILTER (WHERE NOT r.success) AS failed_requests
    FROM (SELECT * FROM points WHERE trial_id IN (SELECT trial_id FROM logged)) AS p
    LEFT JOIN request_samples AS r
        ON r.trial_id = p.trial_id
        AND r.locust_counted IS NOT FALSE
        AND r.ts >= p.window_start_ts AND r.ts < p.window_end_ts + 1
    GROUP BY p.trial_id, p.step
    UNION ALL
    SELECT trial_id, step, NULL, NULL, requests, failed_requests FROM history_totals
)
SELECT
    p.trial_id,
    p.step::INTEGER AS step,
    count(*) OVER (PARTITION BY p.trial_id) AS points,
    p.target_users,
    p.hold_s,
    p.complete,
    p.recorded,
    o.users,
    o.users * p.actors_per_user AS actors,
    CASE WHEN f.node_count > 0 THEN py_round(o.users * p.actors_per_user / f.node_count, 2) END AS actors_per_node,
    CASE WHEN f.allocatable_cores > 0 THEN py_round(o.users * p.actors_per_user / f.allocatable_cores, 2) END
        AS actors_per_vcpu,
    CASE WHEN f.allocatable_ram_gb > 0 THEN py_round(o.users * p.actors_per_user / f.allocatable_ram_gb, 2) END
        AS actors_per_gb_ram,
    p.started_at,
    p.ended_at,
    p.window_start_ts,
    p.window_end_ts,
    p.window_end_ts - p.window_start_ts AS window_s,
    p.whole_step_because,
    CASE WHEN p.trial_id IN (SELECT trial_id FROM logged) THEN coalesce(len(r.wakes), 0) END AS wake_n,
    r.wake_failed,
    floor_index_of_sorted(r.wakes, 500) AS wake_p50_ms,
    floor_index_of_sorted(r.wakes, 900) AS wake_p90_ms,
    floor_index_of_sorted(r.wakes, 990) AS wake_p99_ms,
    list_max(r.wakes) AS wake_max_ms,
    r.requests,
    r.failed_requests,
    CASE WHEN r.requests > 0 THEN r.failed_requests / r.requests END AS failure_ratio,
    p.* EXCLUDE (trial_id, step, target_users, hold_s, started_at, ended_at, window_start_ts, window_end_ts,
                 whole_step_because, recorded, actors_per_user, complete)
FROM points AS p
LEFT JOIN observed AS o USING (trial_id, step)
LEFT JOIN requests AS r USING (trial_id, step)
LEFT JOIN cluster_facts AS f USING (trial_id)
ORDER BY p.trial_id, p.step
