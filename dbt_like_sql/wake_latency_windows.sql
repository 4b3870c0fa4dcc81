-- How a trial's wake latency drifts over its length: its wakes (wake_latency_distribution's: each family's wake
-- row Locust counted, failed or not, with an exact latency) in consecutive five-minute windows, counted from the
-- trial's first request. One row per window holding at least one such wake; the last window ends at the trial's
-- last request and may be shorter (window_end_s says where). Percentiles are floor-index, as the distribution's;
-- a soak's drift is read off these rows (bench/soak.py, the report's drift plot).
WITH trial_start AS (
    SELECT trial_id, min(ts) AS first_ts, max(ts) AS last_ts
    FROM request_samples
    WHERE ts IS NOT NULL
    GROUP BY trial_id
),
wakes AS (
    SELECT
        r.trial_id,
        CAST(floor((r.ts - s.first_ts) / 300) AS INTEGER) AS window_index,
        s.last_ts - s.first_ts AS trial_span_s,
        r.latency_ms,
        r.success
    FROM request_samples AS r
    JOIN trial_start AS s ON s.trial_id = r.trial_id
    WHERE is_wake(r.wake, r.name) AND r.locust_counted IS NOT FALSE AND r.latency_ms IS NOT NULL AND r.ts IS NOT NULL
),
windows AS (
    SELECT
        trial_id,
        window_index,
        any_value(trial_span_s) AS trial_span_s,
        list_sort(list(latency_ms)) AS sorted_latencies,
        count(*) FILTER (WHERE NOT success) AS n_failed_wakes
    FROM wakes
    GROUP BY trial_id, window_index
)
SELECT
    trial_id,
    window_index,
    CAST(300 * window_index AS DOUBLE) AS window_start_s,
    CAST(least(300 * (window_index + 1), trial_span_s) AS DOUBLE) AS window_end_s,
    len(sorted_latencies) AS n_wakes,
    n_failed_wakes,
    floor_index_of_sorted(sorted_latencies, 500) AS p50_ms,
    floor_index_of_sorted(sorted_latencies, 990) AS p99_ms,
    list_max(sorted_latencies) AS max_ms
FROM windows
ORDER BY trial_id, window_index
