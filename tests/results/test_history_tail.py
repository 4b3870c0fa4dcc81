"""The progress line follows a growing stats_history.csv at a constant cost per look: only the appended bytes."""

from pathlib import Path

from substrate_assets.results.history_tail import StatsHistoryTail

HEADER = ("Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%,"
          "Total Request Count,Total Failure Count,Total Median Response Time,Total Average Response Time,"
          "Total Min Response Time,Total Max Response Time,Total Average Content Size\n")


def row(second: int, users: int, requests: int, failures: int, name: str = "Aggregated") -> str:
    kind = "" if name == "Aggregated" else "GET"
    return (f"{1764489600 + second},{users},{kind},{name},1.0,0.0,240,240,240,240,240,240,240,240,240,240,240,"
            f"{requests},{failures},240,240.0,240,240,0.0\n")


def append(path: Path, text: str) -> int:
    with path.open("a") as handle:
        handle.write(text)
    return len(text.encode())


def test_each_look_reads_only_what_was_appended_since_the_last(tmp_path: Path) -> None:
    history = tmp_path / "stats_history.csv"
    tail = StatsHistoryTail(history)
    assert tail.latest_totals() == {}  # Locust has not created the file yet
    appended = append(history, HEADER + row(0, 0, 0, 0))
    assert tail.latest_totals() == {"users": 0, "requests": 0, "failures": 0}
    assert tail.bytes_read == appended
    for second in range(1, 2001):
        before = tail.bytes_read
        appended = append(history, row(second, 1 + second // 100, 3 * second, second // 500)
                          + row(second, 1, second, 0, name="wake"))
        assert tail.latest_totals() == {"users": 1 + second // 100, "requests": 3 * second,
                                        "failures": second // 500}
        assert tail.bytes_read - before == appended, f"second {second}: a look read more than the new rows"
    assert tail.bytes_read == history.stat().st_size


def test_a_look_with_nothing_new_reads_nothing(tmp_path: Path) -> None:
    history = tmp_path / "stats_history.csv"
    append(history, HEADER + row(0, 4, 10, 1))
    tail = StatsHistoryTail(history)
    first = tail.latest_totals()
    read = tail.bytes_read
    assert tail.latest_totals() == first == {"users": 4, "requests": 10, "failures": 1}
    assert tail.bytes_read == read


def test_a_row_still_being_written_waits_for_its_line_end(tmp_path: Path) -> None:
    history = tmp_path / "stats_history.csv"
    append(history, HEADER + row(0, 2, 5, 0))
    tail = StatsHistoryTail(history)
    assert tail.latest_totals()["requests"] == 5
    whole = row(1, 3, 9, 0)
    append(history, whole[:17])  # cut mid-number: read as 9 requests' prefix it would be a wrong figure
    assert tail.latest_totals() == {"users": 2, "requests": 5, "failures": 0}
    append(history, whole[17:])
    assert tail.latest_totals() == {"users": 3, "requests": 9, "failures": 0}


def test_not_available_counts_are_none_not_zero(tmp_path: Path) -> None:
    history = tmp_path / "stats_history.csv"
    append(history, HEADER + row(0, 2, 5, 0).replace(",2,,Aggregated", ",N/A,,Aggregated"))
    assert StatsHistoryTail(history).latest_totals() == {"users": None, "requests": 5, "failures": 0}


def test_a_replaced_shorter_file_is_followed_from_its_start(tmp_path: Path) -> None:
    history = tmp_path / "stats_history.csv"
    append(history, HEADER + "".join(row(second, 5, second, 0) for second in range(50)))
    tail = StatsHistoryTail(history)
    assert tail.latest_totals()["requests"] == 49
    history.write_text(HEADER + row(0, 1, 1, 0))
    assert tail.latest_totals() == {"users": 1, "requests": 1, "failures": 0}
