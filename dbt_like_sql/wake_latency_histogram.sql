-- Every wake (wake_latency_distribution's) Locust counted (failed ones too, as Locust books them) in Locust's own
-- buckets: the whole milliseconds Locust was given (the truncated latency), rounded half-to-even to
-- 1 ms below 100 ms, 10 ms below 1 s, 100 ms below 10 s, then 1 s. Trials merge by summing counts,
-- and percentiles read off these buckets are Locust's. ok_count is the successful ones only.
SELECT
    trial_id,
    locust_bucket(response_time_ms) AS bucket_ms,
    count(*) AS count,
    count(*) FILTER (WHERE success) AS ok_count
FROM request_samples
WHERE is_wake(wake, name) AND locust_counted IS NOT FALSE AND response_time_ms IS NOT NULL
GROUP BY ALL
ORDER BY trial_id, bucket_ms
