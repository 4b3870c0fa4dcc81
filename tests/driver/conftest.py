"""Agent sessions driven step by step against a real embedded runtime, with every booked row kept."""

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.scripts import ScriptSource
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.driver.users.session import AgentSessionVU, TemplateCheck
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from substrate_assets.workload import ScriptLibrary

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@dataclass
class Row:
    request_type: str
    name: str
    started: float
    elapsed_s: float
    error: BaseException | None
    context: dict

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Rows:
    rows: list[Row] = field(default_factory=list)

    def __call__(self, request_type, name, started, elapsed_s, error, context) -> None:
        self.rows.append(Row(request_type, name, started, elapsed_s, error, dict(context)))

    def names(self) -> list[str]:
        return [row.name for row in self.rows]

    def clear(self) -> None:
        self.rows.clear()


def write_script(directory: Path, text: str, name: str = "test-session") -> ScriptSource:
    path = directory / f"{name}.yaml"
    path.write_text(text)
    return ScriptSource(ScriptLibrary(directory), file=str(path))


def make_vu(runtime: EmbeddedRuntime, scripts: ScriptSource, rows: Rows, *, router_timeout_s: float = 30.0,
            template_check: TemplateCheck | None = None, **knobs) -> AgentSessionVU:
    control = ControlClient(runtime.control_address)
    return AgentSessionVU(control, RouterClient(runtime.router_url, timeout_s=router_timeout_s), scripts,
                          WorkerKnobs(**knobs), template_check or TemplateCheck(control), rows,
                          sleep=lambda seconds: None, rng=random.Random(7))


@pytest.fixture(scope="module")
def runtime():
    with EmbeddedRuntime(RuntimeConfig(workers=2, actors_per_worker=2, warm_hosts=1)) as started:
        yield started


@pytest.fixture
def rows():
    return Rows()
