-- How long a parked actor takes to answer its first request: every successful WakeFirstTouch of a
-- trial, from the exact per-request latencies (not Locust's buckets). Percentiles are floor-index
-- (sorted[min(floor(n * p), n - 1)]); a trial without wakes has n = 0 and null figures.
WITH wakes AS (
    SELECT
        m.trial_id,
        list(r.latency_ms) FILTER (WHERE r.latency_ms IS NOT NULL) AS latencies
    FROM trial_manifests AS m
    LEFT JOIN request_samples AS r
        ON r.trial_id = m.trial_id AND r.name = 'WakeFirstTouch' AND r.success
    GROUP BY m.trial_id
)
SELECT
    trial_id,
    coalesce(len(latencies), 0) AS n,
    list_min(latencies) AS min_ms,
    floor_index(latencies, 500) AS p50_ms,
    floor_index(latencies, 900) AS p90_ms,
    floor_index(latencies, 950) AS p95_ms,
    floor_index(latencies, 990) AS p99_ms,
    floor_index(latencies, 999) AS p99_9_ms,
    list_max(latencies) AS max_ms,
    list_avg(latencies) AS mean_ms
FROM wakes
ORDER BY trial_id
