-- Successful WakeFirstTouch latencies counted in Locust's buckets (1 ms below 100 ms, 10 ms below
-- 1 s, 100 ms below 10 s, then 1 s; half-to-even), so trials merge by summing counts and plots match
-- Locust's own percentiles.
SELECT
    trial_id,
    locust_bucket(latency_ms) AS bucket_ms,
    count(*) AS count
FROM request_samples
WHERE name = 'WakeFirstTouch' AND success
GROUP BY ALL
ORDER BY trial_id, bucket_ms
