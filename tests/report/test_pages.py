"""The pages from a warehouse filled by hand, without a browser: what they hold, what they say when a table or row is
missing, how figures round, and `substrate-bench report` writing them."""

from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from substrate_assets.cli import main
from substrate_assets.report.html import figure, inline_svg
from substrate_assets.report.pages import NotInWarehouse, history_report, trial_report
from substrate_assets.warehouse.connection import connect
from tests.report import warehouse


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    return warehouse.fill(tmp_path_factory.mktemp("warehouse") / "warehouse.duckdb", per_step=500)


@pytest.fixture(scope="module")
def without_history(tmp_path_factory):
    return warehouse.fill(tmp_path_factory.mktemp("warehouse") / "warehouse.duckdb", per_step=500, history=False)


def test_a_missing_trial_or_suite_is_named(filled):
    with connect(filled, read_only=True) as connection:
        with pytest.raises(NotInWarehouse, match=f"no trial 'no-such-trial' in the warehouse {filled}"):
            trial_report(connection, "no-such-trial")
        with pytest.raises(NotInWarehouse, match=f"no trials of suite 'no-such-suite' in the warehouse {filled}"):
            history_report(connection, "no-such-suite")


def test_trial_report_holds_the_headline_figures_and_charts(filled):
    with connect(filled, read_only=True) as connection:
        page = trial_report(connection, warehouse.LADDER_TRIAL, generated_at=datetime(2026, 3, 13, 8, tzinfo=UTC))
        p99 = connection.execute("SELECT p99_ms FROM wake_latency_distribution WHERE trial_id = ?",
                                 [warehouse.LADDER_TRIAL]).fetchone()[0]
    assert "generated 2026-03-13 08:00:00 UTC" in page and f"warehouse {filled}" in page
    assert f"<td class=\"num\">{p99:,.1f}</td>" in page
    for words in ("Headline figures", "Density frontier", "SLO capacity and knee", "wake latency CDF",
                  "wake p99 by load point", "SLO: wake p99 ≤ 250.0 ms", "knee: 100 users", "03_run_tests"):
        assert words in page
    assert page.count("<svg") == 2


def test_a_flat_trial_has_no_load_points_chart(filled):
    with connect(filled, read_only=True) as connection:
        page = trial_report(connection, warehouse.BASELINE_TRIAL)
    assert page.count("<svg") == 1 and "One load point (a flat trial)" in page


def test_history_report_without_its_tables_says_so(without_history):
    with connect(without_history, read_only=True) as connection:
        page = history_report(connection, warehouse.HISTORY_SUITE)
    assert "The warehouse has no metric_history table yet" in page
    assert "The warehouse has no change_points table yet" in page
    assert "<svg" not in page


def test_history_report_of_a_suite_without_figures_says_so(filled):
    with connect(filled, read_only=True) as connection:
        page = history_report(connection, warehouse.SUITE)
    assert f"The suite {warehouse.SUITE} has no trials with figures in metric_history yet." in page
    assert "No change points in this suite" in page


def test_history_report_tables(filled):
    with connect(filled, read_only=True) as connection:
        page = history_report(connection, warehouse.HISTORY_SUITE)
    assert page.count("<svg") == 1
    assert '<td class="word-regressed">regressed</td>' in page and '<td class="word-improved">improved</td>' in page
    assert '<td class="num">0.00031</td>' in page  # a p-value to 2 significant digits


@pytest.mark.parametrize(("value", "column", "unit", "shown"), [
    (123.456, "p99_ms", None, "123.5"),
    (1234.56, "value", "ms", "1,234.6"),
    (0.000312345, "p_value", "ms", "0.00031"),
    (3.14159e-12, "p_value", None, "3.1e-12"),
    (0.0123456, "failure_ratio", None, "0.0123"),
    (12.3456, "actors_per_node", None, "12.35"),
    (21.94, "change_pct", "ms", "+21.9 %"),
    (48000, "n_wakes", None, "48,000"),
    (120.0, "users", None, "120"),
    (None, "p50_ms", None, "—"),
    (True, "complete", None, "yes"),
    (datetime(2026, 3, 12, 10, 15, tzinfo=UTC), "started_at", None, "2026-03-12 10:15:00 UTC"),
    (1796103342.0, "started_at", None, "1796103342"),
    (1796098653, "run_ts", None, "1796098653"),
])
def test_figures_round_by_what_they_are(value, column, unit, shown):
    assert figure(value, column, unit) == shown


def test_inline_svg_ids_are_made_unique_in_the_page():
    svg = '<svg><defs><clipPath id="clip1"><rect/></clipPath></defs><g clip-path="url(#clip1)"></g></svg>'
    assert inline_svg(svg, "chart-a") == ('<svg><defs><clipPath id="chart-a-clip1"><rect/></clipPath></defs>'
                                          '<g clip-path="url(#chart-a-clip1)"></g></svg>')


def test_cli_writes_to_the_project_reports_directory_by_default(filled, tmp_path):
    env = {"SUBSTRATE_BENCH_WAREHOUSE": str(filled), "SUBSTRATE_BENCH_ROOT": str(tmp_path)}
    done = CliRunner().invoke(main, ["report", "--suite", warehouse.HISTORY_SUITE], env=env)
    assert done.exit_code == 0, done.output
    written = tmp_path / "reports" / f"history-{warehouse.HISTORY_SUITE}.html"
    assert done.output.strip() == str(written) and written.read_text().startswith("<!DOCTYPE html>")
    assert [path.name for path in written.parent.iterdir()] == [written.name]  # nothing half-written left beside it
    done = CliRunner().invoke(main, ["report", "--trial", "../../etc/x"], env=env)
    assert done.exit_code == 1 and "no trial '../../etc/x' in the warehouse" in done.output


def test_cli_asks_for_exactly_one_report(filled):
    env = {"SUBSTRATE_BENCH_WAREHOUSE": str(filled)}
    for args in ([], ["--trial", "a", "--suite", "b"]):
        done = CliRunner().invoke(main, ["report", *args], env=env)
        assert done.exit_code == 2 and "give exactly one of --trial, --suite" in done.output


def test_cli_without_a_warehouse(tmp_path):
    done = CliRunner().invoke(main, ["report", "--trial", "t"],
                              env={"SUBSTRATE_BENCH_WAREHOUSE": str(tmp_path / "none.duckdb")})
    assert done.exit_code == 1 and "no warehouse at" in done.output
    assert not (tmp_path / "none.duckdb").exists()


def test_default_file_name_keeps_a_subject_inside_reports(tmp_path, monkeypatch):
    from substrate_assets.cli.report import default_output

    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(tmp_path))
    assert default_output("trial", "../../etc/passwd") == tmp_path / "reports" / "trial-etc_passwd.html"
    assert default_output("comparison", ("a/b", "c")) == tmp_path / "reports" / "comparison-a_b-vs-c.html"
