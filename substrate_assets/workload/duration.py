"""Go ``time.Duration`` text: ``time.ParseDuration`` and ``Duration.String``, to the nanosecond.

Think times are written as Go durations (``2s``, ``1.5s``, ``500ms``). Both
directions follow the Go standard library's algorithms, including the float64
arithmetic it uses for fractional parts, so a think time decodes to exactly the
nanoseconds upstream computes and ``parse_duration(format_duration(d)) == d``.
"""

from __future__ import annotations

from substrate_assets.workload.text import quote

NANOSECOND = 1
MICROSECOND = 1_000
MILLISECOND = 1_000_000
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

_UNITS = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "µs": MICROSECOND,  # U+00B5 MICRO SIGN
    "μs": MICROSECOND,  # U+03BC GREEK SMALL LETTER MU
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}
_LIMIT = 1 << 63


class DurationError(ValueError):
    """The text is not a Go duration."""


def _leading_int(s: str) -> tuple[int, str]:
    value, i = 0, 0
    while i < len(s) and "0" <= s[i] <= "9":
        if value > _LIMIT // 10:
            raise OverflowError
        value = value * 10 + ord(s[i]) - ord("0")
        if value > _LIMIT:
            raise OverflowError
        i += 1
    return value, s[i:]


def _leading_fraction(s: str) -> tuple[int, float, str]:
    value, scale, i, overflow = 0, 1.0, 0, False
    while i < len(s) and "0" <= s[i] <= "9":
        if not overflow:
            if value > (_LIMIT - 1) // 10:
                overflow = True
            else:
                candidate = value * 10 + ord(s[i]) - ord("0")
                if candidate > _LIMIT:
                    overflow = True
                else:
                    value = candidate
                    scale *= 10
        i += 1
    return value, scale, s[i:]


def parse_duration(text: str) -> int:
    """Nanoseconds of a Go duration such as ``1h2m3.5s``; ``d`` (days) is not a unit."""
    invalid = DurationError(f"invalid duration {quote(text)}")
    s = text
    negative = False
    if s and s[0] in "+-":
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    total = 0
    while s:
        if not (s[0] == "." or "0" <= s[0] <= "9"):
            raise invalid
        before = len(s)
        try:
            whole, s = _leading_int(s)
        except OverflowError:
            raise invalid from None
        had_whole = before != len(s)
        fraction, scale, had_fraction = 0, 1.0, False
        if s and s[0] == ".":
            s = s[1:]
            before = len(s)
            fraction, scale, s = _leading_fraction(s)
            had_fraction = before != len(s)
        if not had_whole and not had_fraction:
            raise invalid
        i = 0
        while i < len(s) and s[i] != "." and not ("0" <= s[i] <= "9"):
            i += 1
        if i == 0:
            raise DurationError(f"missing unit in duration {quote(text)}")
        unit_text, s = s[:i], s[i:]
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise DurationError(f"unknown unit {quote(unit_text)} in duration {quote(text)}")
        if whole > _LIMIT // unit:
            raise invalid
        whole *= unit
        if fraction > 0:
            whole += int(float(fraction) * (float(unit) / scale))
            if whole > _LIMIT:
                raise invalid
        total += whole
        if total > _LIMIT:
            raise invalid
    if negative:
        return -total
    if total > _LIMIT - 1:
        raise invalid
    return total


def _format_fraction(value: int, precision: int) -> tuple[str, int]:
    """Digits after the point of ``value / 10**precision``, trailing zeros dropped."""
    digits = []
    printed = False
    for _ in range(precision):
        digit = value % 10
        printed = printed or digit != 0
        if printed:
            digits.append(str(digit))
        value //= 10
    fraction = "".join(reversed(digits))
    return ("." + fraction if fraction else ""), value


def format_duration(nanoseconds: int) -> str:
    """Go's ``Duration.String``: ``2s``, ``1.5s``, ``500ms``, ``1m9s``, ``1h0m0s``, ``0s``."""
    if nanoseconds == 0:
        return "0s"
    negative = nanoseconds < 0
    u = -nanoseconds if negative else nanoseconds
    sign = "-" if negative else ""
    if u < SECOND:
        if u < MICROSECOND:
            return f"{sign}{u}ns"
        if u < MILLISECOND:
            fraction, whole = _format_fraction(u, 3)
            return f"{sign}{whole}{fraction}µs"
        fraction, whole = _format_fraction(u, 6)
        return f"{sign}{whole}{fraction}ms"
    fraction, seconds = _format_fraction(u, 9)
    text = f"{seconds % 60}{fraction}s"
    minutes = seconds // 60
    if minutes > 0:
        text = f"{minutes % 60}m{text}"
        hours = minutes // 60
        if hours > 0:
            text = f"{hours}h{text}"
    return sign + text
