-- The history of each headline figure (trial_figures, where each is declared with its unit and which way it improves):
-- one row per trial and figure the trial measured, in the order of its configuration's trials (capacity_history's
-- configuration and trial_number, and the trial's suite, started_at and sut_version), the series change_points
-- analyses. A figure that is null (or NaN, ±Inf) was not measured and has no row: a series holds measurements only,
-- never a value carried over from another trial. A trial that did not run to its end (trial_manifests.completed
-- false: stopped early) measured part of a run and is left out; one whose end is unknown is kept. A disturbed trial
-- (trial_manifests.disturbed: the machine was busy with other work) is not a sample of its configuration and is left
-- out too, from the noise floor and change points with it.
SELECT
    h.suite,
    h.configuration,
    h.trial_id,
    h.started_at,
    h.trial_number,
    h.sut_version,
    f.figure AS metric,
    f.value,
    f.unit,
    f.better
FROM trial_figures AS f
JOIN capacity_history AS h USING (trial_id)
JOIN trial_manifests AS t USING (trial_id)
WHERE f.value IS NOT NULL AND isfinite(f.value) AND t.completed IS NOT FALSE AND t.disturbed IS NOT TRUE
ORDER BY h.suite, h.configuration, f.figure, h.trial_number
