"""What Dagster shows of a table's first rows: figures rounded by column (report/figures.py's rule, null as a dash), and a table too wide for the
page turned on its side."""

from substrate_assets.defs.warehouse.metadata import WIDE_PREVIEW_ROWS, preview_markdown


def test_a_narrow_preview_is_a_table_with_rounded_figures():
    text = preview_markdown(["trial_id", "p50_ms", "failure_ratio", "run_ts"],
                            [{"trial_id": "a", "p50_ms": 748.7297280000007, "failure_ratio": 0.012345678,
                              "run_ts": 1796098653},
                             {"trial_id": "b", "p50_ms": None, "failure_ratio": 0.0, "run_ts": 1}])
    assert text.splitlines() == ["| trial_id | p50_ms | failure_ratio | run_ts |", "|---|---|---|---|",
                                 "| a | 748.7 | 0.0123 | 1796098653 |", "| b | — | 0.0000 | 1 |"]


def test_one_row_reads_as_column_value_lines():
    lines = preview_markdown(["trial_id", "note"], [{"trial_id": "a", "note": "x|y\nz"}]).splitlines()
    assert lines == ["| column | value |", "|---|---|", "| trial_id | a |", "| note | x\\|y z |"]


def test_a_wide_preview_is_turned_on_its_side_with_its_first_rows():
    columns = [f"c{n}_ms" for n in range(20)]
    rows = [{column: float(n) for column in columns} for n in range(10)]
    lines = preview_markdown(columns, rows).splitlines()
    assert lines[0] == "| column | " + " | ".join(f"row {n}" for n in range(1, WIDE_PREVIEW_ROWS + 1)) + " |"
    assert len(lines) == 2 + len(columns) and lines[2] == "| c0_ms | 0.0 | 1.0 | 2.0 |"


def test_no_rows_is_a_header():
    assert preview_markdown(["a"], []).splitlines() == ["| a |", "|---|"]


def test_no_rows_of_a_wide_table_is_its_columns_on_their_side():
    columns = [f"c{n}" for n in range(14)]  # a header this wide would reach past the page
    assert preview_markdown(columns, []).splitlines() == ["| column (no rows yet) |", "|---|",
                                                          *(f"| {column} |" for column in columns)]


def test_times_in_epoch_seconds_read_without_separators():
    lines = preview_markdown(["started_at", "window_s"], [{"started_at": 1796103342.0, "window_s": 12345.0}])
    assert "| started_at | 1796103342 |" in lines.splitlines() and "| window_s | 12,345 |" in lines.splitlines()


def test_a_long_value_is_cut_in_the_middle_so_the_preview_fits_the_page():
    path = "/tmp/pytest-of-root/pytest-1/project0/store/runs/smoke/run_date=2026-12-01/run_ts=1796159138/run_tag=local"
    sha = "69e9cef622e729bcc0da1e6cd79e149f267271c58892dc4fd9a4aaa9f8c0cc98"
    lines = preview_markdown(["trial_dir", "script_sha256"], [{"trial_dir": path, "script_sha256": sha}]).splitlines()
    cut_path, cut_sha = (line.removesuffix(" |").split(" | ")[1] for line in lines[2:])
    assert len(cut_path) == 48 and cut_path.startswith("/tmp/pytest-of-root/") and cut_path.endswith("run_tag=local")
    assert cut_sha == f"{sha[:23]}…{sha[-24:]}"
    assert preview_markdown(["a"], [{"a": "x" * 48}]).splitlines()[2] == f"| a | {'x' * 48} |"  # up to 48: whole
