-- SLO capacity and knee per trial, over its load points (the steps of its step-ladder; a flat trial is a
-- ladder of one point). The SLO is the suite's: slo_wake_p99_ms (a point's wake_p99_ms must be <= it) and
-- slo_failure_ratio (a point's failure_ratio must be <= it), each optional. A point cut short (complete
-- false: the trial stopped during it) is not judged: it neither meets nor breaks the SLO.
-- Per point and threshold the figure is not applicable (threshold null), unmeasured (the point's figure
-- null), met (<=) or exceeded (>). A point meets the SLO when at least one threshold applies and every
-- applicable one is measured and met; it breaks the SLO when any applicable threshold is measured and
-- exceeded; otherwise it is unmeasured, neither meeting nor breaking, and is skipped.
-- The knee is the lowest step that breaks; the capacity is the highest step that meets below the knee (any
-- step when there is no knee). Capacity never passes a break: later steps run on the state earlier ones
-- left, and a load that once broke the SLO is not a load one can provision for, so a noisy ladder that meets
-- the SLO again above its knee keeps its capacity below the knee; met_above_knee counts those points (null
-- without a knee), and highest_meeting_step/_users give the highest meeting point regardless of breaks
-- (upstream's slo_knee) for comparison. broken_by names the thresholds exceeded at the knee.
-- A missing figure is null with its reason, never an error: capacity_null_because / knee_null_because are
-- 'the trial has no load points' (no session started, or no step's start was recorded), 'the suite sets no
-- SLO', 'no complete load point measured the SLO''s figures' (every point unmeasured or cut short),
-- 'the SLO is broken at the lowest measured load point' (capacity: no meeting point below the knee),
-- 'the SLO is not broken within the ladder' (knee: no point breaks, and every planned step ran to its end)
-- and 'the SLO is not broken in the steps that ran: the trial stopped before its ladder ended'; null when the
-- figure exists. planned_steps and complete_points say how much of the ladder was judged.
WITH judged AS (
    SELECT
        p.trial_id,
        p.step,
        p.target_users,
        p.users,
        p.actors,
        p.actors_per_node,
        p.actors_per_vcpu,
        p.actors_per_gb_ram,
        p.wake_p99_ms,
        p.failure_ratio,
        p.complete IS NOT FALSE AS complete,  -- a point not known to be cut short counts
        m.slo_wake_p99_ms,
        m.slo_failure_ratio,
        CASE
            WHEN m.slo_wake_p99_ms IS NULL THEN 'not_applicable'
            WHEN p.wake_p99_ms IS NULL THEN 'unmeasured'
            WHEN p.wake_p99_ms <= m.slo_wake_p99_ms THEN 'met'
            ELSE 'exceeded'
        END AS wake_verdict,
        CASE
            WHEN m.slo_failure_ratio IS NULL THEN 'not_applicable'
            WHEN p.failure_ratio IS NULL THEN 'unmeasured'
            WHEN p.failure_ratio <= m.slo_failure_ratio THEN 'met'
            ELSE 'exceeded'
        END AS failure_verdict
    FROM load_points AS p
    LEFT JOIN trial_manifests AS m USING (trial_id)
),
points AS (
    SELECT
        *,
        complete AND (slo_wake_p99_ms IS NOT NULL OR slo_failure_ratio IS NOT NULL)
            AND wake_verdict IN ('not_applicable', 'met')
            AND failure_verdict IN ('not_applicable', 'met') AS meets,
        complete AND (wake_verdict = 'exceeded' OR failure_verdict = 'exceeded') AS breaks
    FROM judged
),
knees AS (
    SELECT
        trial_id,
        count(*) AS points,
        count(*) FILTER (WHERE complete) AS complete_points,
        count(*) FILTER (WHERE meets OR breaks) AS measured_points,
        min(step) FILTER (WHERE breaks) AS knee_step,
        max(step) FILTER (WHERE meets) AS highest_meeting_step
    FROM points
    GROUP BY trial_id
),
capacities AS (
    SELECT
        k.trial_id,
        max(p.step) FILTER (WHERE p.meets AND (k.knee_step IS NULL OR p.step < k.knee_step)) AS capacity_step,
        count(*) FILTER (WHERE p.meets AND p.step > k.knee_step) AS meeting_above_knee
    FROM knees AS k
    JOIN points AS p USING (trial_id)
    GROUP BY k.trial_id
)
SELECT
    m.trial_id,
    m.suite,
    m.slo_wake_p99_ms,
    m.slo_failure_ratio,
    coalesce(k.points, 0) AS points,
    m.planned_steps,
    coalesce(k.complete_points, 0) AS complete_points,
    c.capacity_step,
    cap.target_users AS capacity_target_users,
    cap.users AS capacity_users,
    cap.actors AS capacity_actors,
    cap.actors_per_node AS capacity_actors_per_node,
    cap.actors_per_vcpu AS capacity_actors_per_vcpu,
    cap.actors_per_gb_ram AS capacity_actors_per_gb_ram,
    cap.wake_p99_ms AS capacity_wake_p99_ms,
    cap.failure_ratio AS capacity_failure_ratio,
    CASE
        WHEN k.points IS NULL THEN 'the trial has no load points'
        WHEN m.slo_wake_p99_ms IS NULL AND m.slo_failure_ratio IS NULL THEN 'the suite sets no SLO'
        WHEN k.measured_points = 0 THEN 'no complete load point measured the SLO''s figures'
        WHEN c.capacity_step IS NULL THEN 'the SLO is broken at the lowest measured load point'
    END AS capacity_null_because,
    k.knee_step,
    knee.target_users AS knee_target_users,
    knee.users AS knee_users,
    knee.actors AS knee_actors,
    knee.actors_per_node AS knee_actors_per_node,
    knee.wake_p99_ms AS knee_wake_p99_ms,
    knee.failure_ratio AS knee_failure_ratio,
    nullif(concat_ws(', ',
        CASE WHEN knee.wake_verdict = 'exceeded' THEN 'wake_p99_ms' END,
        CASE WHEN knee.failure_verdict = 'exceeded' THEN 'failure_ratio' END), '') AS broken_by,
    CASE
        WHEN k.points IS NULL THEN 'the trial has no load points'
        WHEN m.slo_wake_p99_ms IS NULL AND m.slo_failure_ratio IS NULL THEN 'the suite sets no SLO'
        WHEN k.measured_points = 0 THEN 'no complete load point measured the SLO''s figures'
        WHEN k.knee_step IS NOT NULL THEN NULL
        WHEN k.complete_points < m.planned_steps
            THEN 'the SLO is not broken in the steps that ran: the trial stopped before its ladder ended'
        ELSE 'the SLO is not broken within the ladder'
    END AS knee_null_because,
    CASE WHEN k.knee_step IS NOT NULL THEN c.meeting_above_knee END AS met_above_knee,
    k.highest_meeting_step,
    highest.users AS highest_meeting_users
FROM trial_manifests AS m
LEFT JOIN knees AS k USING (trial_id)
LEFT JOIN capacities AS c USING (trial_id)
LEFT JOIN points AS cap ON cap.trial_id = m.trial_id AND cap.step = c.capacity_step
LEFT JOIN points AS knee ON knee.trial_id = m.trial_id AND knee.step = k.knee_step
LEFT JOIN points AS highest ON highest.trial_id = m.trial_id AND highest.step = k.highest_meeting_step
ORDER BY m.trial_id
