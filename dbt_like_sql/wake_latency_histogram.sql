-- Successful WakeFirstTouch latencies counted in Locust's buckets (1 ms below 100 ms, 10 ms below
-- 1 s, 100 ms below 10 s, then 1 s; half-to-even), so trials merge by summing counts and plots match
-- Locust's own percentiles.
SELECT
    trial_id,
    CAST(
        CASE
            WHEN latency_ms < 100 THEN round_even(latency_ms, 0)
            WHEN latency_ms < 1000 THEN round_even(latency_ms, -1)
            WHEN latency_ms < 10000 THEN round_even(latency_ms, -2)
            ELSE round_even(latency_ms, -3)
        END AS BIGINT
    ) AS bucket_ms,
    count(*) AS count
FROM request_samples
WHERE name = 'WakeFirstTouch' AND success
GROUP BY ALL
ORDER BY trial_id, bucket_ms
