"""A process ended by exit_now ends as sys.exit would, less the interpreter's teardown: its atexit handlers run, what
it printed reaches its reader, its status is sys.exit's; while another thread still works, it ends nothing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).parent / "substrate-bench")

CHILD = """
import atexit, sys, threading
from substrate_assets.processes.quick_exit import exit_now

atexit.register(lambda: print("atexit ran", flush=True))
sys.stdout.write("buffered, never flushed by hand\\n")
code = eval(sys.argv[1])
if sys.argv[2] == "working":
    done = threading.Event()
    def work():
        done.wait()
        print("the thread finished its work")
    threading.Thread(target=work).start()
    exit_now(code)
    print("exit_now returned")
    done.set()
    sys.exit(code)
# A finalizer the teardown would run: exit_now skips it, as it skips the rest of the teardown.
class Torn:
    def __del__(self):
        print("torn down")
kept = Torn()
exit_now(code)
print("never printed")
"""


def _child(code: str, thread: str = "none") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, code, thread], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("code", "status", "said"), [("None", 0, ""), ("0", 0, ""), ("4", 4, ""),
                                                        ("'no such trial'", 1, "no such trial\n")])
def test_the_process_ends_with_sys_exits_status_its_output_and_its_atexit_handlers(code, status, said):
    ended = _child(code)
    assert ended.returncode == status
    assert ended.stdout == "buffered, never flushed by hand\natexit ran\n"
    assert ended.stderr == said


def test_while_another_thread_works_it_ends_nothing_and_the_exit_waits_for_it():
    ended = _child("3", "working")
    assert ended.returncode == 3
    assert ended.stdout.splitlines() == ["buffered, never flushed by hand", "exit_now returned",
                                         "the thread finished its work", "atexit ran"]


def test_the_command_ends_with_its_status_and_says_all_it_had_to():
    """The installed ``substrate-bench`` ends through exit_now: an unknown command's usage error (click's status 2)
    and its message are kept."""
    ended = subprocess.run([CLI, "no-such-command"], capture_output=True, text=True, timeout=120)
    assert ended.returncode == 2
    assert "No such command 'no-such-command'" in ended.stderr
    listed = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "validate" in listed.stdout


def test_output_that_cannot_be_written_is_said_and_fails_the_exit_as_the_interpreters_own_exit_does():
    """Output kept in the buffer until the exit (a CSV the command wrote), to a full disk: said on stderr, status 120,
    not a success with the rows lost."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        ended = subprocess.run([sys.executable, "-c", CHILD, "0", "none"], stdout=full, stderr=subprocess.PIPE,
                               text=True, timeout=60, env=env)
    assert ended.returncode == 120
    assert "the output was not all written" in ended.stderr and "No space left on device" in ended.stderr
