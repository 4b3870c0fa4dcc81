"""Table metadata Dagster shows: row count, column schema, a markdown preview, the table name."""

from typing import Any

import dagster as dg

from substrate_assets.warehouse.models import BuiltTable


def _markdown(columns: list[str], rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join("null" if row.get(c) is None else str(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def table_metadata(table: BuiltTable, rows: int | None = None,
                   preview: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    columns = [name for name, _ in table.columns]
    return {
        "dagster/row_count": table.rows if rows is None else rows,
        "dagster/column_schema": dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in table.columns]),
        "dagster/table_name": f"warehouse.main.{table.name}",
        "preview": dg.MetadataValue.md(_markdown(columns, table.preview if preview is None else preview)),
    }
