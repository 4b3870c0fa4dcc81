"""Locust's Runner.stop still logs who stopped it, without inspect.stack()'s cost (a source line per frame, and a
map of every loaded module's file): in a child process (tests do not import Locust), with the locustfile loaded,
a local runner started with one user and stopped logs the same debug line as with the real inspect module."""

import json
import subprocess
import sys

CHILD = r'''
import inspect, json, logging, sys
sys.argv = ["locust"]
from gevent import monkey
monkey.patch_all()
import substrate_assets.driver.locustfile  # noqa: F401  (what Locust loads)
import locust.runners
from locust import User, constant, task
from locust.env import Environment

class Idle(User):
    wait_time = constant(60)

    @task
    def nothing(self):
        pass

lines = []
handler = logging.Handler()
handler.emit = lambda record: lines.append(record.getMessage())
logger = logging.getLogger("locust.runners")
logger.addHandler(handler)
logger.setLevel(logging.DEBUG)

def start_and_stop():
    runner = Environment(user_classes=[Idle]).create_local_runner()
    runner.start(1, 1, wait=True)
    runner.stop()

stand_in = locust.runners.inspect
start_and_stop()
locust.runners.inspect = inspect
start_and_stop()
print(json.dumps({"lines": [line for line in lines if line.startswith("Stopping all users")],
                  "stand_in": stand_in is not inspect}))
'''


def test_runner_stop_logs_the_same_caller_as_with_inspect():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, timeout=120)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    ours, inspects = found["lines"]
    assert found["stand_in"]
    assert ours == inspects
    assert ours.startswith("Stopping all users (called from ") and "runners.py:" in ours
