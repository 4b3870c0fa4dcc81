"""Kubernetes quantities and Go durations, against the rules they come from."""

import pytest

from substrate_assets.workload.duration import DurationError, format_duration, parse_duration
from substrate_assets.workload.quantity import (
    QuantityError,
    format_binary_si,
    format_size,
    parse_byte_count,
    parse_quantity,
)


@pytest.mark.parametrize(("text", "count"), [
    ("1Gi", 1073741824), ("32Mi", 33554432), ("64Ki", 65536), ("1.5Gi", 1610612736), ("0.5Ki", 512),
    ("1e3", 1000), ("1E3", 1000), ("1k", 1000), ("1M", 1_000_000), ("1G", 10**9), ("+4096", 4096),
    ("1000m", 1), (".5Ki", 512), ("2.Mi", 2097152), ("1E", 10**18), ("7Ei", 7 * 2**60),
])
def test_whole_byte_counts(text, count):
    assert parse_byte_count(text) == count


@pytest.mark.parametrize("text", [
    "100m", "0", "0Mi", "-1Mi", "1.0000001", "1e-3", "", " 1Mi", "1Mi ", "1 Mi", "Mi", "1.5.5", "1_000",
    "Infinity", "NaN", "1e", "1KiB", "1mi", "8Ei", "1e19", "0x10", ".", "1e99999",
])
def test_not_whole_positive_byte_counts(text):
    with pytest.raises(QuantityError, match="is not a positive whole byte count"):
        parse_byte_count(text)


def test_quantity_is_exact():
    assert parse_quantity("0.1") * 10 == 1
    assert parse_quantity("1n") * 10**9 == 1


@pytest.mark.parametrize(("count", "canonical"), [
    (0, "0"), (512, "512"), (1023, "1023"), (1024, "1Ki"), (1536, "1536"), (103284736, "100864Ki"),
    (100663296, "96Mi"), (1073741824, "1Gi"), (2**60, "1Ei"), (2**61, "2Ei"),
])
def test_binary_si_canonical_form(count, canonical):
    assert format_binary_si(count) == canonical
    if count:
        assert parse_byte_count(canonical) == count


@pytest.mark.parametrize(("count", "shown"), [
    (100663296, "96Mi"), (103284736, "98.5Mi"), (51052544, "48.69Mi"), (1073741824, "1Gi"), (524288, "512Ki"),
    (100, "100B"), (0, "0"),
])
def test_human_sizes(count, shown):
    assert format_size(count) == shown


@pytest.mark.parametrize(("text", "nanoseconds"), [
    ("2s", 2_000_000_000), ("1.5s", 1_500_000_000), ("500ms", 500_000_000), ("1h2m3.5s", 3_723_500_000_000),
    ("0", 0), ("-1s", -1_000_000_000), ("+2s", 2_000_000_000), ("1.5ns", 1), ("1us", 1000), ("1µs", 1000),
    ("1μs", 1000), (".5m", 30_000_000_000), ("1.s", 1_000_000_000), ("2562047h47m16.854775807s", 2**63 - 1),
    ("-2562047h47m16.854775808s", -(2**63)), ("0.333333333333s", 333_333_333),
])
def test_go_parse_duration(text, nanoseconds):
    assert parse_duration(text) == nanoseconds


@pytest.mark.parametrize(("text", "message"), [
    ("", 'invalid duration ""'), ("2", 'missing unit in duration "2"'), ("1d", 'unknown unit "d"'),
    ("1e3s", 'unknown unit "e"'), (".s", "invalid duration"), ("s", "invalid duration"), ("+", "invalid duration"),
    ("2562047h47m16.854775808s", "invalid duration"), ("1s ", 'unknown unit "s "'), ("1S", 'unknown unit "S"'),
    ("9999999999999999999h", "invalid duration"),
])
def test_go_parse_duration_rejects(text, message):
    with pytest.raises(DurationError, match=message.replace("(", r"\(")):
        parse_duration(text)


@pytest.mark.parametrize(("nanoseconds", "text"), [
    (0, "0s"), (1, "1ns"), (1100, "1.1µs"), (2_200_000, "2.2ms"), (3_300_000_000, "3.3s"),
    (69_000_000_000, "1m9s"), (3_600_000_000_000, "1h0m0s"), (-1_500_000_000, "-1.5s"),
    (2**63 - 1, "2562047h47m16.854775807s"), (-(2**63), "-2562047h47m16.854775808s"),
])
def test_go_duration_string(nanoseconds, text):
    assert format_duration(nanoseconds) == text
    assert parse_duration(text) == nanoseconds
