"""benchmark_site as Dagster runs it: materialized over a real warehouse on a real (ephemeral) instance, it writes the
site and links to it from its materialization; the automation that follows every trial builds it after the marts."""

import dagster as dg

from substrate_assets.definitions import defs
from substrate_assets.defs.resources import SuitesResource
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.defs.warehouse.sensors import warehouse_refresh
from substrate_assets.defs.warehouse.site import BENCHMARK_SITE, SiteResource, benchmark_site
from substrate_assets.project import SITE_URL_ENV
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.marts import build_marts
from substrate_assets.warehouse.trial_writes import load_trials
from tests.report.test_site import T0, requests
from tests.support.synthetic_trials import write_trial


def test_the_asset_builds_the_site_and_links_to_it(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "store")
    for suite, median in (("fast", 10.0), ("slow", 50.0)):
        for n in range(2):
            write_trial(store, suite, T0 + 100 * n + int(median), requests(n, median))
    path = tmp_path / "warehouse.duckdb"
    with connect(path) as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in store.trial_dirs()])
        build_marts(connection)
    (tmp_path / "suites.yaml").write_text("suites: []\n")
    index = tmp_path / "site" / "index.html"
    seen = []
    with dg.instance_for_test() as instance:
        # Where `make ui` serves it, then beside a UI started on another port, which says where.
        for url in (None, "http://127.0.0.1:4001/"):
            if url:
                monkeypatch.setenv(SITE_URL_ENV, url)
            else:
                monkeypatch.delenv(SITE_URL_ENV, raising=False)
            resources = {"warehouse": WarehouseResource(database=str(path)),
                         "suites": SuitesResource(path=str(tmp_path / "suites.yaml")),
                         "site": SiteResource(directory=str(tmp_path / "site"))}
            result = dg.materialize([benchmark_site], instance=instance, resources=resources)
            assert result.success
            event, = result.get_asset_materialization_events()
            seen.append(event.materialization.metadata)
    assert index.is_file() and "Latest verdicts" in index.read_text()
    assert seen[0]["site"].value == "http://127.0.0.1:3001/" and seen[0]["index"].value == str(index)
    assert seen[1]["site"].value == "http://127.0.0.1:4001/"
    # 1 landing page, 2 suites, 4 trials, 2 latest comparisons.
    assert (seen[0]["pages"].value, seen[0]["suites"].value, seen[0]["trials"].value) == (9, 2, 4)


def test_the_automation_that_follows_each_trial_builds_the_site_after_the_marts():
    graph = defs.resolve_asset_graph()
    assert dg.AssetKey(BENCHMARK_SITE) in warehouse_refresh.asset_selection.resolve(graph)
    spec = benchmark_site.specs_by_key[dg.AssetKey(BENCHMARK_SITE)]
    assert {dep.asset_key.to_user_string() for dep in spec.deps} >= {"capacity_history", "metric_history",
                                                                   "change_points"}
    assert graph.get(dg.AssetKey(BENCHMARK_SITE)).automation_condition.get_label() == "the marts were refreshed"
