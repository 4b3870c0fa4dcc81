"""csv_damage reads a file in 1 MiB pieces: what it finds past the first piece is placed as in the whole file."""

import pytest

from substrate_assets.results.readers import csv_damage, read_stats_history

HEADER = b"Timestamp,User Count,Type,Name\n"
ROW = b"1795132800,5,,Aggregated\n"


def _file(tmp_path, body: bytes):
    path = tmp_path / "stats_history.csv"
    path.write_bytes(body)
    return path


def _rows_past_a_piece() -> tuple[bytes, int]:
    count = (1 << 20) // len(ROW) + 10
    return HEADER + ROW * count, count + 1  # the bytes, the number of lines


def test_a_character_split_by_a_piece_boundary_is_text(tmp_path):
    # Rows, then one whose Name ends so that the two bytes of "é" straddle the first piece's end.
    head = HEADER + ROW * ((1 << 20) // len(ROW) - 2)
    pad = (1 << 20) - len(head) - len("1795132800,5,,") - 1
    body = head + b"1795132800,5,," + b"x" * pad + "é\n".encode() + ROW
    assert body.index("é".encode()) == (1 << 20) - 1
    assert csv_damage(_file(tmp_path, body)) is None
    assert csv_damage(_file(tmp_path, body), body) is None


@pytest.mark.parametrize(("bad", "why"), [
    (b"\0", "binary data (a NUL byte at byte {at}), not CSV text"),
    (b"\xff", "not UTF-8 text (invalid start byte at byte {at}): binary data, not CSV text"),
])
def test_bad_bytes_past_the_first_piece_are_placed_in_the_whole_file(tmp_path, bad, why):
    body, lines = _rows_past_a_piece()
    body += b"1795132800," + bad + b",,Aggregated\n"
    at = len(body) - len(b",,Aggregated\n") - 1
    damage = csv_damage(_file(tmp_path, body))
    assert damage is not None
    assert (damage.line, damage.reason) == (lines + 1, why.format(at=at))
    same = csv_damage(_file(tmp_path, body), body)
    assert same is not None and (same.line, same.reason) == (damage.line, damage.reason)


def test_a_character_cut_at_the_end_of_the_file_is_not_text(tmp_path):
    body = HEADER + "1795132800,5,,é".encode()[:-1]
    damage = csv_damage(_file(tmp_path, body))
    assert damage is not None and damage.reason.startswith("not UTF-8 text (unexpected end of data at byte ")


def test_a_short_row_past_the_first_piece_is_named_by_its_line(tmp_path):
    body, lines = _rows_past_a_piece()
    damage = csv_damage(_file(tmp_path, body + b"1795132800,5\n" + ROW))
    assert damage is not None
    assert (damage.line, damage.reason) == (lines + 1, "2 fields where the header has 4: the row is cut short or "
                                                       "the file is not Locust's")


def test_a_history_read_in_batches_holds_every_row_typed(tmp_path):
    body, lines = _rows_past_a_piece()
    history = read_stats_history(_file(tmp_path, body))
    assert history.height == lines - 1
    assert history["user_count"].unique().to_list() == [5.0]
    assert history["p50"].null_count() == history.height  # not in the file: not measured
