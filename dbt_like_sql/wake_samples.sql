-- Every wake the marts count (each family's wake row, as docs/families.md lists, that Locust counted: the population of
-- wake_latency_distribution), with the path its resume took, from the embedded runtime's own events: unpause (a
-- paused actor's host continued), restore_warm (a host waiting in the pool took the snapshot), restore_cold (none was
-- waiting: the wake also waited for a host to start), restore (an event log older than that distinction). A wake's
-- resume is its actor's last restore or unpause that started before the wake ended and after the actor's previous
-- wake ended: an implicit wake's resume starts inside its request, an explicit one's (ResumeActor first) just
-- before. wake_path is null where no event answered the wake: its actor was already running, or the trial kept no
-- events (a cluster's, an upstream run).
WITH wakes AS (
    SELECT
        trial_id,
        session_id,
        name,
        ts,
        latency_ms,
        success,
        ts + coalesce(latency_ms, 0) / 1000 AS ended_ts
    FROM request_samples
    WHERE is_wake(wake, name) AND locust_counted IS NOT FALSE
),
ordered AS (
    SELECT *, lag(ended_ts) OVER (PARTITION BY trial_id, session_id ORDER BY ended_ts, ts) AS previous_ended_ts
    FROM wakes
),
resumes AS (
    SELECT
        trial_id,
        actor AS session_id,
        start_ts AS resume_ts,
        CASE WHEN kind = 'unpause' THEN 'unpause'
             WHEN host_start IN ('warm', 'cold') THEN 'restore_' || host_start
             ELSE 'restore' END AS path
    FROM runtime_events
    WHERE kind IN ('restore', 'unpause') AND actor IS NOT NULL AND start_ts IS NOT NULL
)
SELECT
    w.trial_id,
    w.session_id,
    w.name,
    w.ts,
    w.latency_ms,
    w.success,
    CASE WHEN w.previous_ended_ts IS NULL OR r.resume_ts > w.previous_ended_ts THEN r.path END AS wake_path
FROM ordered AS w
ASOF LEFT JOIN resumes AS r
    ON r.trial_id = w.trial_id AND r.session_id = w.session_id AND w.ended_ts >= r.resume_ts
ORDER BY w.trial_id, w.ts
