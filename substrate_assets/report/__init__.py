"""Reports people read: how a figure is rounded for a person (``figures.py``, also used by the Dagster layer and the
CLI), Altair charts of the warehouse's figures (``plots.py``), one self-contained HTML page (``html.py``) and the
pages themselves, read from the warehouse (``pages.py``). No Dagster: the Dagster layer embeds the same charts as PNG
in its metadata."""
