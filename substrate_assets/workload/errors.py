"""The one error a workload script can raise, pointing at file, line, column, step and op."""

from __future__ import annotations

from dataclasses import dataclass

from substrate_assets.workload.text import quote


@dataclass(frozen=True)
class Position:
    """A place in a YAML document; line and column count from 1, as editors show them."""

    line: int
    column: int


@dataclass(frozen=True)
class ScriptProblem:
    """One broken rule, located as precisely as the document allows."""

    message: str
    path: str | None = None
    position: Position | None = None
    step: str | None = None
    step_number: int | None = None
    op_index: int | None = None
    op_kind: str | None = None

    @property
    def line(self) -> int | None:
        return self.position.line if self.position else None

    @property
    def column(self) -> int | None:
        return self.position.column if self.position else None

    @property
    def op_number(self) -> int | None:
        """The op's 1-based position in its step, as messages print it."""
        return None if self.op_index is None else self.op_index + 1

    def located(self, path: str) -> ScriptProblem:
        return ScriptProblem(self.message, path, self.position, self.step, self.step_number,
                             self.op_index, self.op_kind)

    def __str__(self) -> str:
        where = self.path or "<script>"
        if self.position is not None:
            where = f"{where}:{self.position.line}:{self.position.column}"
        context = []
        if self.step_number is not None:
            context.append(f"step {quote(self.step)}" if self.step else f"step {self.step_number}")
        if self.op_index is not None:
            kind = f" ({self.op_kind})" if self.op_kind else ""
            context.append(f"op {self.op_index + 1}{kind}")
        prefix = f"{where}: "
        if context:
            prefix += " ".join(context) + ": "
        return prefix + self.message


class ScriptError(ValueError):
    """A workload script that cannot be used, with every problem found in it.

    The attributes describe the first problem (file, line, column, step, op);
    ``problems`` holds all of them, in document order. ``str()`` prints one
    ``path:line:col: ...`` line per problem.
    """

    def __init__(self, problems: list[ScriptProblem] | ScriptProblem) -> None:
        if isinstance(problems, ScriptProblem):
            problems = [problems]
        if not problems:
            raise ValueError("a ScriptError needs at least one problem")
        self.problems: tuple[ScriptProblem, ...] = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))

    @property
    def first(self) -> ScriptProblem:
        return self.problems[0]

    @property
    def path(self) -> str | None:
        return self.first.path

    @property
    def line(self) -> int | None:
        return self.first.line

    @property
    def column(self) -> int | None:
        return self.first.column

    @property
    def step(self) -> str | None:
        return self.first.step

    @property
    def step_number(self) -> int | None:
        return self.first.step_number

    @property
    def op_index(self) -> int | None:
        return self.first.op_index

    @property
    def op_number(self) -> int | None:
        return self.first.op_number

    @property
    def op_kind(self) -> str | None:
        return self.first.op_kind

    def located(self, path: str) -> ScriptError:
        return ScriptError([problem.located(path) for problem in self.problems])


class ScriptNotFound(ScriptError, FileNotFoundError):
    """No script of that name: reported as a script problem, and caught as the missing file it also is."""
