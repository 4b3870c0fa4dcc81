"""Run-store layout and atomic writes."""

import os
from pathlib import Path

import pytest

from substrate_assets.results.atomic import atomic_path, write_json
from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.results.readers import read_requests
from substrate_assets.results.request_log import RequestLogWriter, RequestRecord, merge_parts, start_seconds


def test_trial_key_paths_and_ids():
    key = TrialKey("coding-session-smoke", 1796033700, "0123abc")
    assert key.trial_id == "coding-session-smoke-20261130t101500z"
    assert key.relative_path == "runs/coding-session-smoke/run_date=2026-11-30/run_ts=1796033700/run_tag=0123abc"
    assert TrialKey.parse("/x/store/" + key.relative_path + "/") == key
    with pytest.raises(ValueError, match="not a trial directory"):
        TrialKey.parse("runs/x/run_date=2026-11-30")


def test_store_lists_and_finds_trials(tmp_path):
    store = RunStore(tmp_path)
    older, newer = TrialKey("s", 100, "t"), TrialKey("s", 200, "t")
    for key in (newer, older):
        store.trial_dir(key).mkdir(parents=True)
    assert store.trial_dirs() == [store.trial_dir(older), store.trial_dir(newer)]
    assert store.find(newer.trial_id) == store.trial_dir(newer)
    with pytest.raises(FileNotFoundError):
        store.find("nope")


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "file.json"
    write_json(target, {"a": 1})
    with pytest.raises(RuntimeError), atomic_path(target) as partial:
        partial.write_text("half")
        raise RuntimeError("boom")
    assert target.read_text() == '{\n  "a": 1\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["file.json"]
    assert oct(os.stat(target).st_mode & 0o777) == "0o644"


def test_request_log_parts_merge_in_time_order(tmp_path):
    writer = RequestLogWriter(tmp_path / "parts")
    writer.append(RequestRecord(2.0, "http", "WakeFirstTouch", 12.345678, 12, 0, True, session_id="a", lap=0))
    writer.flush()
    assert writer.flush() is None  # nothing new, no empty part
    writer.append(RequestRecord(1.0, "grpc", "SuspendActor", 80.5, 80, 0, False, error="RpcError: x"))
    writer.flush()
    assert len(list((tmp_path / "parts").glob("part-*.parquet"))) == 2
    assert merge_parts(tmp_path / "parts", tmp_path / "requests.parquet").height == 2
    frame = read_requests(tmp_path / "requests.parquet")
    assert frame["name"].to_list() == ["SuspendActor", "WakeFirstTouch"]
    assert frame["latency_ms"].to_list() == [80.5, 12.345678]
    assert frame["error"].to_list() == ["RpcError: x", None]


def test_merge_marks_the_rows_locust_counted(tmp_path):
    """Locust counts the first ``Request Count`` rows of each (type, name) it booked; later ones are kept, marked."""
    writer = RequestLogWriter(tmp_path / "parts")
    for seq in (1, 2, 3):
        writer.append(RequestRecord(float(seq), "http", "WakeFirstTouch", 1.0, 1, 0, True, phase="steady",
                                    locust_seq=seq))
    writer.append(RequestRecord(4.0, "grpc", "DeleteActor", 1.0, 1, 0, True, phase="stopping", locust_seq=1))
    writer.append(RequestRecord(5.0, "grpc", "WakeFirstTouch", 1.0, 1, 0, True, phase="steady", locust_seq=1))
    writer.flush()
    merged = merge_parts(tmp_path / "parts", tmp_path / "counted.parquet", {("http", "WakeFirstTouch"): 2})
    frame = read_requests(tmp_path / "counted.parquet")
    # A landing trial's figures come from the merged frame, not from reading the file back: the two are one.
    assert merged.equals(frame) and merged.schema == frame.schema
    assert frame["locust_counted"].to_list() == [True, True, False, False, False]
    assert frame["phase"].to_list() == ["steady", "steady", "steady", "stopping", "steady"]
    merge_parts(tmp_path / "parts", tmp_path / "unknown.parquet")
    assert read_requests(tmp_path / "unknown.parquet")["locust_counted"].to_list() == [None] * 5


def test_a_request_without_a_start_time_has_none(tmp_path):
    assert start_seconds(None) is None and start_seconds(1795132800) == 1795132800.0
    writer = RequestLogWriter(tmp_path / "parts")
    writer.append(RequestRecord(start_seconds(None), "http", "WakeFirstTouch", 1.0, 1, 0, True))
    writer.flush()
    merge_parts(tmp_path / "parts", tmp_path / "requests.parquet")
    assert read_requests(tmp_path / "requests.parquet")["ts"].to_list() == [None]  # not the epoch


def test_merge_with_no_parts_writes_an_empty_log(tmp_path):
    assert merge_parts(tmp_path / "none", tmp_path / "requests.parquet").height == 0
    assert read_requests(Path(tmp_path / "requests.parquet")).height == 0


def test_trial_ids_are_minted_once_for_every_caller(tmp_path):
    store = RunStore(tmp_path)
    now = 1796033700.4
    key = store.propose_key("smoke", "local", now=now)
    assert key == TrialKey("smoke", 1796033700, "local")
    store.trial_dir(TrialKey("smoke", 1796033700, "other-tag")).mkdir(parents=True)  # same id, another tag
    assert store.propose_key("smoke", "local", now=now).run_ts == 1796033701
    assert store.propose_key("smoke", "local", taken={"smoke-20261130t101501z"}, now=now).run_ts == 1796033702
    claimed = store.claim(TrialKey("smoke", 1796033702, "local"))
    assert claimed == tmp_path / ".staging" / "smoke-20261130t101502z"
    assert store.propose_key("smoke", "local", now=now + 2).run_ts == 1796033703  # being assembled counts


def test_a_trial_is_never_claimed_twice(tmp_path):
    from substrate_assets.results.layout import TrialExists

    store = RunStore(tmp_path)
    key = TrialKey("smoke", 1796033700, "local")
    store.claim(key)
    with pytest.raises(TrialExists, match="being assembled"):
        store.claim(key)
    store.trial_dir(TrialKey("smoke", 1796033700, "v2")).mkdir(parents=True)
    with pytest.raises(TrialExists, match="already ran"):
        store.refuse_existing(TrialKey("smoke", 1796033700, "v3"))


def test_a_landed_trial_leaves_its_scratch_area_and_owner_behind(tmp_path):
    store = RunStore(tmp_path)
    key = TrialKey("smoke", 1796033700, "local")
    staging = store.claim(key)
    (staging / "trial.json").write_text("{}\n")
    landed = store.land(key)
    assert landed == store.trial_dir(key) and not staging.exists()
    assert sorted(path.name for path in landed.iterdir()) == ["trial.json"]
    assert store.trial_dirs() == [landed] and store.sweep_dead_staging() == []
