"""How far each model is built, in ``changes.marks`` (:mod:`~substrate_assets.warehouse.changes`): the seq it is
built through, what built it, and the generations that say when what it reads was built whole since."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

import duckdb

from substrate_assets.warehouse import changes
from substrate_assets.warehouse.models.discovery import ModelNode


def target_seq(books: changes.Books, upstream_models: Collection[str]) -> int:
    """The seq a model can be built through now: the latest load, or less when a model it reads is behind (its rows
    of later trials are not there yet, so they are taken up when that model catches up)."""
    return min([books.latest, *(books.mark(name) or 0 for name in upstream_models)])


def upstream_of(model: ModelNode, models: Mapping[str, ModelNode]) -> list[str]:
    return [name for name in model.upstream if name in models]


def read_by(name: str, models: Mapping[str, ModelNode]) -> set[str]:
    """The models ``name`` reads, directly or not."""
    found: set[str] = set()
    waiting = [name]
    while waiting:
        current = waiting.pop()
        for upstream in models[current].upstream if current in models else ():
            if upstream in models and upstream not in found:
                found.add(upstream)
                waiting.append(upstream)
    return found


def changed_trials(connection: duckdb.DuckDBPyConnection, name: str, models: Mapping[str, ModelNode], after: int,
                   through: int, books: changes.Books) -> list[str]:
    """The trials whose rows of what ``name`` reads changed after seq ``after`` up to ``through``: loaded, or
    rewritten by a partitioned model it reads (directly or not) as another trial of a new trial's partition."""
    return changes.changed_trials(connection, after, through, set(models), read_by(name, models), books)


def past_a_load_of(connection: duckdb.DuckDBPyConnection, books: changes.Books, name: str,
                   models: Mapping[str, ModelNode], caught_up: int, seq: int) -> None:
    """Every model built through ``caught_up`` that does not read ``name`` is built through ``seq`` too: the load
    ``name`` recorded at ``seq`` changed nothing it reads, and a model that reads it would wait for it otherwise."""
    for other, mark in list(books.marks.items()):
        if mark.seq == caught_up and other != name and name not in read_by(other, models):
            books.marks[other] = dataclasses.replace(mark, seq=seq)
            write_mark(connection, books, other, marked=True)


def held_trials(connection: duckdb.DuckDBPyConnection, books: changes.Books, trial_ids: Sequence[str], built: int,
                models: Collection[str]) -> list[str]:
    """Those of ``trial_ids`` a model built through seq ``built`` may hold rows of: every trial first loaded by then
    (a trial new since has none: its delete, which reads the table's every trial_id, is skipped)."""
    first = changes.first_loads(connection, books, trial_ids, models)
    return [trial_id for trial_id in trial_ids if first.get(trial_id, 0) <= built]


def set_mark(connection: duckdb.DuckDBPyConnection, books: changes.Books, name: str, seq: int, built_by: str,
             upstream_models: Collection[str], *, whole: bool) -> None:
    """``name`` built through ``seq``: a whole build is the warehouse's newest generation; an update keeps its own.
    Either way it has taken up the newest whole build of the models it reads."""
    generation = books.generation(books.marks) + 1 if whole or name not in books.marks \
        else books.marks[name].generation
    mark = changes.Mark(seq, built_by, generation, books.generation(upstream_models))
    marked = name in books.marks
    books.marks[name] = mark
    write_mark(connection, books, name, marked=marked)
    books.tables.add(name)


def write_mark(connection: duckdb.DuckDBPyConnection, books: changes.Books, name: str, *, marked: bool) -> None:
    """``books``' mark of ``name`` written now, or with every other one at the end of a refresh that saves them
    together (:func:`changes.save_marks`)."""
    if books.unsaved is not None:
        books.unsaved.add(name)
    else:
        changes.set_mark(connection, name, books.marks[name], marked=marked)


def behind_a_whole_build(books: changes.Books, name: str, upstream_models: Collection[str]) -> bool:
    """Whether a model ``name`` reads was built whole since ``name`` was brought up to date: any of its rows may
    have changed, so ``name`` is built whole too."""
    return books.generation(upstream_models) > books.marks[name].upstream_generation
