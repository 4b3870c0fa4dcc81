"""A text as an SQL string literal, for the few statements DuckDB takes no parameter in (``ATTACH``, ``LOAD``,
``CREATE SECRET``): single quotes doubled, the whole in single quotes."""


def quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
