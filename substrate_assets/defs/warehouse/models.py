"""One asset per ``dbt_like_sql`` model (pool ``duckdb``), its schema.yml tests as asset checks, refreshed
declaratively (``warehouse_refresh``) whenever a trial's raw tables land."""

import dagster as dg

from substrate_assets.defs.warehouse.metadata import check_result, model_metadata
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.warehouse.checks import ColumnTest, load_tests, run_test
from substrate_assets.warehouse.models import Model, ModelError, build, discover, models_directory
from substrate_assets.warehouse.raw import RAW_TABLES


def _model_asset(model: Model, tests: list[ColumnTest], known: set[str]) -> dg.AssetsDefinition:
    unknown = [name for name in model.upstream if name not in known]
    if unknown:
        raise ModelError(f"{model.path}: reads {', '.join(unknown)}, which is neither a raw table nor a model "
                         f"(have {', '.join(sorted(known))})")

    @dg.asset(
        name=model.name,
        deps=[dg.AssetKey(name) for name in model.upstream],
        group_name="marts",
        kinds={"duckdb", "sql"},
        pool="duckdb",
        automation_condition=dg.AutomationCondition.eager(),
        check_specs=[dg.AssetCheckSpec(test.name, asset=model.name, description=test.description())
                     for test in tests],
        description=model.description or f"Model {model.name} ({model.path.name}).",
        metadata={"sql_file": dg.MetadataValue.path(str(model.path)), "sql": dg.MetadataValue.md(
            f"```sql\n{model.sql}\n```")},
    )
    def materialize(warehouse: WarehouseResource) -> dg.MaterializeResult:
        with warehouse.connect() as connection:
            built = build(connection, model)
            outcomes = [run_test(connection, test) for test in tests]
        return dg.MaterializeResult(metadata=model_metadata(built),
                                    check_results=[check_result(outcome) for outcome in outcomes])

    return materialize


def model_assets() -> list[dg.AssetsDefinition]:
    models = discover(models_directory())
    tests = load_tests(models_directory() / "schema.yml", set(models))
    known = set(RAW_TABLES) | set(models)
    return [_model_asset(model, tests.get(name, []), known) for name, model in models.items()]


mart_assets = model_assets()
