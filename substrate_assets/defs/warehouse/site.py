"""``benchmark_site``: the benchmark site (:mod:`substrate_assets.report.site`), built again after each refresh of
the marts, and linked from its materialization: one click from the asset graph to the benchmark."""

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import dagster as dg
from pydantic import Field

from substrate_assets.defs.catalog import OWNERS, Materialized
from substrate_assets.defs.resources import Resource, SuitesResource
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.project import Deployment, site_directory, site_url
from substrate_assets.suites import Suite, compare_thresholds

if TYPE_CHECKING:  # the chart libraries are imported only where a site is built
    from substrate_assets.report.site import BuiltSite

BENCHMARK_SITE = "benchmark_site"
# What the site reads across trials; a refresh of the marts updates them all, and the site follows.
READS = ("capacity_history", "metric_history", "change_points", "noise_floor", "wake_latency_distribution")


class SiteResource(Resource):
    """Where the site is written (``$SUBSTRATE_BENCH_SITE``, else ``site/`` in the project) and where people open
    it (:func:`~substrate_assets.project.site_url`: where ``substrate-bench ui`` serves it; a page of the UI cannot
    open a file link)."""

    directory: str = Field(default_factory=lambda: str(site_directory()))
    url: str = Field(default_factory=site_url)


def _after_the_marts() -> dg.AutomationCondition[dg.AssetKey | dg.AssetCheckKey]:
    """Once the marts it reads were refreshed, with none of them still in progress (a site of half a refresh would
    be rebuilt a tick later anyway)."""
    return (dg.AutomationCondition.any_deps_updated() & ~dg.AutomationCondition.any_deps_missing()
            & ~dg.AutomationCondition.any_deps_in_progress() & ~dg.AutomationCondition.in_progress()
            ).with_label("the marts were refreshed")


@dg.asset(name=BENCHMARK_SITE, deps=[dg.AssetKey(name) for name in READS], group_name="marts", owners=OWNERS,
          pool="duckdb", kinds={"html"}, automation_condition=_after_the_marts(),
          description="The benchmark site, static pages built from the warehouse: the latest verdict of each suite "
          "and configuration, each suite's primary figures through time (noise bands, change points, groups, "
          "disturbed trials marked), a page per trial and per latest comparison. `substrate-bench site --serve` "
          "serves it; `substrate-bench ui` serves it beside the UI, and its materialization links there.")
def benchmark_site(context: dg.AssetExecutionContext, warehouse: WarehouseResource, suites: SuitesResource,
                   site: SiteResource) -> Materialized:
    described = build_and_describe(warehouse, suites.all(), site)
    context.log.info(described.said)
    return dg.MaterializeResult(metadata=described.metadata)


class DescribedSite(NamedTuple):
    """A site built: a line saying what was built, the materialization's metadata, and the build itself."""

    said: str
    metadata: dict[str, dg.MetadataValue]
    built: "BuiltSite"


def build_and_describe(warehouse: WarehouseResource, suites: Mapping[str, Suite], site: SiteResource
                       ) -> DescribedSite:
    """Build the site from the warehouse (``suites``: every suite by name, for their thresholds) and describe it.
    What the asset does in a run, and the main job outside one."""
    # Imported here: the chart libraries cost ~0.6 s to import, paid by every process that loads the definitions.
    from substrate_assets.report.site import build_site

    with warehouse.read() as connection:  # a read: no writer lock, so it never holds a load up
        built = build_site(connection, Path(site.directory), lambda suite: compare_thresholds(suite, suites),
                           warehouse=warehouse.database)
    said = (f"benchmark site: {built.pages} pages ({built.trials - built.trials_kept} trial pages drawn) in "
            f"{built.seconds:.1f} s at {built.index}")
    return DescribedSite(said, {
        "site": dg.MetadataValue.url(site.url),
        "index": dg.MetadataValue.path(str(built.index)),
        "pages": dg.MetadataValue.int(built.pages),
        "suites": dg.MetadataValue.int(built.suites),
        "trials": dg.MetadataValue.int(built.trials),
        "build_s": dg.MetadataValue.float(round(built.seconds, 2)),
    }, built)


# The site is a workstation's: a cluster's run pod would write it where nobody opens it, and be gone.
site_assets = [benchmark_site] if Deployment.current().holds_warehouse else []
