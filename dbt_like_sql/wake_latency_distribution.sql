-- How long a parked actor takes to answer its first request, from the exact per-request latencies
-- (not Locust's buckets). The main figures count every wake Locust counted, failed or not, as its
-- stats.csv does (n_wakes, n_failed); the ok_ columns count the successful ones only. A wake is the row
-- the request log marks wake, its family's wake row (WakeFirstTouch, the first GluttonPing after a
-- resume, DurDirServeAfterResume, ResumeToFirstExec); a log older than that mark: WakeFirstTouch. Rows
-- Locust booked after its last stats write (locust_counted false) are left out; rows whose count is
-- unknown (locust_counted null: distributed runs) are kept (wake_samples holds them, with their paths). Percentiles
-- are floor-index (sorted[min(floor(n_wakes * p), n_wakes - 1)]); gmean_ms is the geometric mean (the exponential of
-- the mean log latency), which does not jump between the wakes' fast and slow groups as the p50 does; slow_share is
-- the share of wakes with a known path that waited for a cold host. A trial without wakes has n_wakes = 0 and null
-- figures; a trial in which no session ever started measured nothing and has no row.
WITH wakes AS (
    SELECT
        m.trial_id,
        list(w.latency_ms) FILTER (WHERE w.latency_ms IS NOT NULL) AS latencies,
        count(w.name) FILTER (WHERE NOT w.success) AS n_failed,
        list(w.latency_ms) FILTER (WHERE w.latency_ms IS NOT NULL AND w.success) AS ok_latencies,
        count(w.wake_path) AS n_with_path,
        count(*) FILTER (WHERE w.wake_path = 'restore_cold') AS n_slow_path
    FROM trial_manifests AS m
    LEFT JOIN wake_samples AS w ON w.trial_id = m.trial_id
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
    CASE WHEN list_min(latencies) > 0 THEN exp(list_avg(list_transform(sorted_latencies, x -> ln(x)))) END
        AS gmean_ms,
    n_with_path,
    CASE WHEN n_with_path > 0 THEN n_slow_path / n_with_path END AS slow_share,
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
