-- One row per trial: what ran (suite, workload family, script and its sha256, backend, tag), when, and how it ended
-- (completed: it ran to its end — Locust exited by itself, 0 or 1, the 1 saying only that some requests failed —
-- and produced stats; failed: no session ever started, so nothing was measured, and failure says why; incomplete:
-- otherwise not completed (stopped early, Locust killed or crashed); unknown: no status). failed_requests counts
-- what failed, apart from how the trial ended: the failures of Locust's Aggregated stats.csv row (null without
-- one), so a completed trial can have failed requests. sut_version is the version of the system under test: what
-- the suite named, else this checkout's commit for the embedded runtime, else the run tag (an upstream run's commit).
-- disturbed: the machine was busy with other work while the trial measured (foreign CPU, steal or CPU pressure over
-- the suite's limits, disturbed_because says which): it is no sample of its configuration, and noise estimates and
-- verdicts leave it out; null where nothing limited was measured (an upstream run).
WITH aggregated AS (
    SELECT trial_id, failure_count AS failed_requests
    FROM locust_stats
    WHERE name = 'Aggregated'
)
SELECT
    m.trial_id,
    m.suite,
    m.family,
    m.script,
    m.script_sha256,
    m.backend,
    m.tag,
    m.sut_version,
    m.started_at,
    m.machine_wait_s,
    m.ended_at,
    CASE
        WHEN m.completed THEN 'completed'
        WHEN m.sessions_started = 0 THEN 'failed'
        WHEN m.completed IS NULL THEN 'unknown'
        ELSE 'incomplete'
    END AS status,
    m.failure,
    a.failed_requests,
    m.sessions_started,
    m.locust_exit_code,
    m.stats_generated,
    m.users,
    m.duration_s,
    m.think_scale,
    m.lifecycle_mode,
    m.resume_mode,
    m.disturbed,
    m.disturbed_because,
    m.foreign_cpu_share,
    m.steal_share,
    m.cpu_pressure
FROM trial_manifests AS m
LEFT JOIN aggregated AS a USING (trial_id)
