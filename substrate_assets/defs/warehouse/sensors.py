"""``warehouse_refresh``: a trial that lands is loaded into the raw tables, then the cross-run models follow."""

import dagster as dg

from substrate_assets.defs.warehouse.models import mart_assets
from substrate_assets.defs.warehouse.raw import raw_assets
from substrate_assets.defs.warehouse.regression_check import no_regression_against_history
from substrate_assets.defs.warehouse.site import site_assets

warehouse_refresh = dg.AutomationConditionSensorDefinition(
    "warehouse_refresh",
    target=dg.AssetSelection.assets(*raw_assets, *mart_assets, *site_assets) | dg.AssetSelection.checks(
        *no_regression_against_history.check_keys),
    default_status=dg.DefaultSensorStatus.RUNNING,
    # Each step of a trial's follow-up waits for a tick: 10 s keeps a UI-launched trial close to a `run` one, at a
    # cost of one condition evaluation (~0.3 s of CPU) per tick.
    minimum_interval_seconds=10,
    # A load or model run whose worker died is launched again by the daemon (the instance's run_retries): its trial
    # would otherwise stay missing, and the marts, never built with a dependency missing, would wait for it forever.
    run_tags={"dagster/max_retries": "2"},
    description="Follows every trial that lands, however it was launched (the run_trial form, `substrate-bench "
    "run`, the script sensor): its raw tables load (eager on trial_run), the cross-run models rebuild (eager on "
    "the raw tables), then the trial is judged against the history of its suite and configuration and the benchmark "
    "site is built again.",
)
