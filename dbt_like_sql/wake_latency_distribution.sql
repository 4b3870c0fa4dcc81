-- How long a parked actor takes to answer its first request, from the exact per-request latencies
-- (not Locust's buckets). The main figures count every wake Locust counted, failed or not, as its
-- stats.csv does (n_wakes, n_failed); the ok_ columns count the successful ones only. A wake is the row
-- the request log marks wake, its family's wake row (WakeFirstTouch, the first GluttonPing after a
-- resume, DurDirServeAfterResume, ResumeToFirstExec); a log older than that mark: WakeFirstTouch. Rows
-- Locust booked after its last stats write (locust_counted false) are left out; rows whose count is
-- unknown (locust_counted null: distributed runs) are kept. Percentiles are floor-index
-- (sorted[min(floor(n_wakes * p), n_wakes - 1)]); a trial without wakes has n_wakes = 0 and null figures; a trial in
-- which no session ever started measured nothing and has no row.
WITH wakes AS (
    SELECT
        m.trial_id,
        list(r.latency_ms) FILTER (WHERE r.latency_ms IS NOT NULL) AS latencies,
        count(r.name) FILTER (WHERE NOT r.success) AS n_failed,
        list(r.latency_ms) FILTER (WHERE r.latency_ms IS NOT NULL AND r.success) AS ok_latencies
    FROM trial_manifests AS m
    LEFT JOIN request_samples AS r
        ON r.trial_id = m.trial_id AND is_wake(r.wake, r.name) AND r.locust_counted IS NOT FALSE
    WHERE m.sessions_started IS DISTINCT FROM 0
    GROUP BY m.trial_id
),
sorted AS (
    -- Sorted once here, for floor_index_of_sorted (floor_index would sort its own copy per percentile); and the
    -- mean is summed in this order, not in the order a parallel aggregate gathered the list, which differs from
    -- build to build in the last bits.
    SELECT *, list_sort(latencies) AS sorted_latencies, list_sort(ok_latencies) AS sorted_ok_latencies
    FROM wakes
)
SELECT
    trial_id,
    coalesce(len(latencies), 0) AS n_wakes,
    n_failed,
    list_min(latencies) AS min_ms,
    floor_index_of_sorted(sorted_latencies, 500) AS p50_ms,
    floor_index_of_sorted(sorted_latencies, 900) AS p90_ms,
    floor_index_of_sorted(sorted_latencies, 950) AS p95_ms,
    floor_index_of_sorted(sorted_latencies, 990) AS p99_ms,
    floor_index_of_sorted(sorted_latencies, 999) AS p99_9_ms,
    list_max(latencies) AS max_ms,
    list_avg(sorted_latencies) AS mean_ms,
    coalesce(len(ok_latencies), 0) AS ok_n,
    list_min(ok_latencies) AS ok_min_ms,
    floor_index_of_sorted(sorted_ok_latencies, 500) AS ok_p50_ms,
    floor_index_of_sorted(sorted_ok_latencies, 900) AS ok_p90_ms,
    floor_index_of_sorted(sorted_ok_latencies, 950) AS ok_p95_ms,
    floor_index_of_sorted(sorted_ok_latencies, 990) AS ok_p99_ms,
    floor_index_of_sorted(sorted_ok_latencies, 999) AS ok_p99_9_ms,
    list_max(ok_latencies) AS ok_max_ms,
    list_avg(sorted_ok_latencies) AS ok_mean_ms
FROM sorted
ORDER BY trial_id
