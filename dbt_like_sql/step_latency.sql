-- Per trial and step, the time of the step's ops (`Step_<name>` rows: ops only, no think, no wake):
-- successful samples (n_ok_steps), failures, and floor-index p50/p95/p99 of the successful ones. Like the wake
-- distribution, only rows Locust counted (or whose count is unknown): n_ok_steps + failures is stats.csv's count.
WITH steps AS (
    SELECT
        trial_id,
        substr(name, 6) AS step,
        count(*) FILTER (WHERE success) AS n_ok_steps,
        count(*) FILTER (WHERE NOT success) AS failures,
        -- Sorted once here, for floor_index_of_sorted (floor_index would sort its own copy per percentile).
        list_sort(list(latency_ms) FILTER (WHERE success)) AS ok_sorted
    FROM request_samples
    WHERE starts_with(name, 'Step_') AND locust_counted IS NOT FALSE
    GROUP BY ALL
)
SELECT
    trial_id,
    step,
    n_ok_steps,
    failures,
    floor_index_of_sorted(ok_sorted, 500) AS p50_ms,
    floor_index_of_sorted(ok_sorted, 950) AS p95_ms,
    floor_index_of_sorted(ok_sorted, 990) AS p99_ms
FROM steps
ORDER BY trial_id, step
