-- One row per trial: what ran (suite, script and its sha256, backend, tag), when, and how it ended
-- (completed: Locust exited 0 and produced stats; failed: no session ever started, so nothing was
-- measured, and failure says why; incomplete: otherwise not completed; unknown: no status).
SELECT
    trial_id,
    suite,
    script,
    script_sha256,
    backend,
    tag,
    started_at,
    ended_at,
    CASE
        WHEN completed THEN 'completed'
        WHEN sessions_started = 0 THEN 'failed'
        WHEN completed IS NULL THEN 'unknown'
        ELSE 'incomplete'
    END AS status,
    failure,
    sessions_started,
    locust_exit_code,
    stats_generated,
    users,
    duration_s,
    think_scale,
    lifecycle_mode,
    resume_mode
FROM trial_manifests
