"""A small dbt-like runner: each ``dbt_like_sql/**/*.sql`` file is one model, one table, one asset.

A model's upstream tables are the tables its SQL reads, found by parsing it
with sqlglot (DuckDB dialect): every table reference that is not one of the
query's own CTEs. Building a model replaces its table in one transaction. The
leading ``--`` comment lines of a file are its description.

A model that schema.yml configures ``config: {materialized: incremental, unique_key: trial_id}`` is *per trial*:
each of its rows depends only on rows of the same trial_id in the tables it reads. Such a model is updated for the
trials loaded since it was last built (:func:`~.build.update`): their rows are deleted and its SQL is run again with
every table it reads narrowed to those trials (CTEs of the same names around its SQL, which DuckDB resolves before
the warehouse's own tables: :mod:`.narrowing`), so an update costs the new trials, not the history.
:func:`~.per_trial_check.per_trial_mismatches` checks the claim on a warehouse (the model over every trial against
the union of it over each one). With ``partition_by: [columns]`` in its config, a row depends on the rows of the
trials of its partition (those columns of the model's rows, as capacity_history numbers a trial among its
configuration's): an update rewrites every trial of the partitions the new trials join or leave, and records the
other trials as a load of the model's own, so what reads it takes them up as new rows. Any other
model is rebuilt whole when a trial it may read changed. ``changes.marks`` (:mod:`changes`, :mod:`.marks`) says how
far each model is built.

- :mod:`.discovery`: the model files read into :class:`~.discovery.Model` s, their order.
- :mod:`.tables`: what a built table holds (:class:`~.tables.BuiltTable`), and comparing two tables' rows.
- :mod:`.narrowing`: a model's SQL run over some trials only.
- :mod:`.marks`: how far each model is built, in the bookkeeping.
- :mod:`.build`: one model built whole or brought up to date.
- :mod:`.python_models`: the models built in Python (change_points, noise_floor), nodes of the same graph.
- :mod:`.marts`: every model built or refreshed in order, each tested right after it: the one refresh.
- :mod:`.per_trial_check`: whether a per-trial model truly is.
"""
