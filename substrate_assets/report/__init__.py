"""Reports people read: Altair charts of the warehouse's figures (``plots.py``), one self-contained HTML page
(``html.py``) and the pages themselves, read from the warehouse (``pages.py``). No Dagster: the Dagster layer embeds
the same charts as PNG in its metadata."""
