"""The project's persistent Dagster instance: ``$DAGSTER_HOME``, else ``<project>/.dagster_home``."""

import os

import dagster as dg

from substrate_assets.project import DAGSTER_HOME_ENV, dagster_home


def project_instance() -> dg.DagsterInstance:
    os.environ[DAGSTER_HOME_ENV] = str(dagster_home())
    return dg.DagsterInstance.get()
