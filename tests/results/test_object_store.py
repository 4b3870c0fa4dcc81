"""The run store on S3: trials uploaded and mirrored, half-uploaded trials skipped, upstream runs imported, and
request-log parts handed from workers to the master — through s3fs against moto's S3 server on 127.0.0.1
(no real object store is reachable from this machine)."""

import filecmp
import json
import os
import time
from pathlib import Path

import fsspec
import pytest
from moto.server import ThreadedMotoServer
from s3fs import S3FileSystem

from substrate_assets.results.importer import (
    UploadInProgress,
    fetch_trial,
    find_runs,
    import_run,
    import_runs,
    upload_trial,
)
from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.results.request_log import RequestLogWriter, RequestRecord, merge_parts, take_uploaded_parts
from substrate_assets.results.trial_directory import UPLOADING

UPSTREAM = Path(__file__).resolve().parents[1] / "data" / "upstream_runs"
BUCKET = "s3://bench-runs"


@pytest.fixture(scope="module")
def s3_server():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                            "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}.items():
            patch.setenv(name, value)
        S3FileSystem.clear_instance_cache()
        yield
        S3FileSystem.clear_instance_cache()
    server.stop()


@pytest.fixture
def s3(s3_server):
    """An empty bucket on the module's S3 server."""
    filesystem = fsspec.filesystem("s3")
    if filesystem.exists("bench-runs"):
        filesystem.rm("bench-runs", recursive=True)
    filesystem.mkdir("bench-runs")
    filesystem.invalidate_cache()
    return filesystem


def native_trial(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "stats.csv").write_text("Type,Name,Request Count\n,Aggregated,12\n")
    (directory / "requests.parquet").write_bytes(os.urandom(4096))
    (directory / "trial.json").write_text(json.dumps({"trial_id": "cluster-smoke-20261130t101500z"}))
    return directory


KEY = TrialKey.from_trial_id("cluster-smoke-20261130t101500z", "main")


def test_a_trial_goes_up_whole_and_comes_back_byte_for_byte(s3, tmp_path):
    local = native_trial(tmp_path / "trial")
    url = upload_trial(local, f"{BUCKET}/store", KEY)
    assert url == f"{BUCKET}/store/{KEY.relative_path}"
    names = sorted(Path(path).name for path in s3.ls(url, detail=False))
    assert names == ["requests.parquet", "stats.csv", "trial.json"]  # the upload marker is gone
    mirrored = fetch_trial(f"{BUCKET}/store", KEY, RunStore(tmp_path / "mirror"))
    assert mirrored.copied and not filecmp.dircmp(local, mirrored.trial_dir).diff_files
    assert sorted(path.name for path in mirrored.trial_dir.iterdir()) == names
    with pytest.raises(FileExistsError, match="never rewritten"):
        upload_trial(local, f"{BUCKET}/store", KEY)


def test_a_half_uploaded_trial_is_not_taken_for_a_whole_one(s3, tmp_path):
    target = f"bench-runs/store/{KEY.relative_path}"
    s3.pipe_file(f"{target}/{UPLOADING}", b"x")
    s3.pipe_file(f"{target}/stats.csv", b"Type,Name\n")
    s3.pipe_file(f"{target}/trial.json", b"{}")
    assert find_runs(f"{BUCKET}/store")[1] == []
    with pytest.raises(FileNotFoundError, match="still being uploaded"):
        fetch_trial(f"{BUCKET}/store", KEY, RunStore(tmp_path / "mirror"))
    filesystem, [], [] = find_runs(f"{BUCKET}/store")
    # An upload that starts after the runs were listed is caught when the run is copied.
    with pytest.raises(UploadInProgress):
        import_run(filesystem, target, RunStore(tmp_path / "mirror"))
    assert not RunStore(tmp_path / "mirror").trial_dir(KEY).exists()
    with pytest.raises(FileExistsError, match="cut short"):
        upload_trial(native_trial(tmp_path / "again"), f"{BUCKET}/store", KEY)


def test_upstream_runs_import_from_s3_as_from_disk(s3, tmp_path):
    s3.put(str(UPSTREAM / "runs"), "bench-runs/upstream/", recursive=True)
    from_s3 = import_runs(f"{BUCKET}/upstream", RunStore(tmp_path / "a"))
    from_disk = import_runs(str(UPSTREAM), RunStore(tmp_path / "b"))
    assert [run.trial_id for run in from_s3] == [run.trial_id for run in from_disk] and len(from_s3) >= 2
    for s3_run, disk_run in zip(from_s3, from_disk, strict=True):
        comparison = filecmp.dircmp(s3_run.trial_dir, disk_run.trial_dir)
        assert not comparison.diff_files and not comparison.left_only and not comparison.right_only
    assert all(not run.copied for run in import_runs(f"{BUCKET}/upstream", RunStore(tmp_path / "a")))


def write_requests(writer: RequestLogWriter, worker: int, count: int = 3) -> None:
    for index in range(count):
        writer.append(RequestRecord(ts=1795132800.0 + index, request_type="HTTP", name="WakeFirstTouch",
                                    latency_ms=80.0 + worker, response_time_ms=80, response_length=10,
                                    success=True, session_id=f"w{worker}"))


def test_workers_request_log_parts_reach_the_master(s3, tmp_path):
    staging = f"{BUCKET}/store/.staging/{KEY.trial_id}"
    for worker in range(2):
        writer = RequestLogWriter(tmp_path / f"worker-{worker}", upload_to=staging)
        write_requests(writer, worker)
        writer.flush()
        write_requests(writer, worker, 2)  # the teardown's rows, after the master has quit
        assert writer.finish()
    taken = take_uploaded_parts(staging, tmp_path / "master", writers=2, wait_s=5)
    assert (taken.writers_done, taken.rows_reported) == (2, 10)
    assert len(list(taken.directory.glob("part-*.parquet"))) == 4
    assert not s3.exists(staging.removeprefix("s3://"))  # taken in, not left behind
    assert merge_parts(taken.directory, tmp_path / "requests.parquet").height == 10


def test_the_master_waits_for_late_workers_and_says_who_is_missing(s3, tmp_path):
    staging = f"{BUCKET}/store/.staging/late"
    writer = RequestLogWriter(tmp_path / "worker", upload_to=staging)
    write_requests(writer, 0)
    writer.flush()  # a part, but no done marker: this worker never finished
    started = time.monotonic()
    taken = take_uploaded_parts(staging, tmp_path / "master", writers=1, wait_s=1.5, poll_s=0.25)
    assert time.monotonic() - started >= 1.5
    assert (taken.writers_done, taken.rows_reported) == (0, 0)
    assert len(list(taken.directory.glob("part-*.parquet"))) == 1  # what did arrive is kept


def test_a_part_the_store_refused_is_sent_at_the_next_flush(s3, tmp_path, caplog):
    staging = "s3://flaky-bucket/stage"
    writer = RequestLogWriter(tmp_path / "worker", upload_to=staging)
    s3.rm("flaky-bucket", recursive=True)  # the store refuses (NoSuchBucket) for a while
    s3.invalidate_cache()
    write_requests(writer, 0)
    writer.flush()  # logged, kept, not raised: the worker's flushing goes on
    assert "trying again at the next flush" in caplog.text
    s3.mkdir("flaky-bucket")
    write_requests(writer, 0, 1)
    assert writer.finish()
    taken = take_uploaded_parts(staging, tmp_path / "master", writers=1)
    assert taken.rows_reported == 4 and merge_parts(taken.directory, tmp_path / "requests.parquet").height == 4
    assert len(list(taken.directory.glob("part-*.parquet"))) == 2
