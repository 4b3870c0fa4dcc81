"""Kubernetes resource quantities, as ``k8s.io/apimachinery`` reads and prints them.

Scripts size RAM arrays and files with quantities (``32Mi``, ``0.5Ki``, ``1e3``).
The grammar is Kubernetes' own::

    <quantity> ::= <sign>? <number> <suffix>
    <number>   ::= <digits> | <digits> "." <digits>? | "." <digits>
    <suffix>   ::= "" | Ki | Mi | Gi | Ti | Pi | Ei | n | u | m | k | M | G | T | P | E
                 | (e|E) <sign>? <digits>

Parsing is exact (``fractions.Fraction``), so a size either is a whole byte
count or is rejected; nothing is rounded. The ``kubernetes`` client's
``parse_quantity`` is looser than the Go parser (it hands the number to
``Decimal``, which accepts ``1_000``, ``Infinity`` and surrounding spaces), so
it cannot be used to say what upstream would refuse.
"""

from __future__ import annotations

import re
from fractions import Fraction

from substrate_assets.workload.text import quote

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

_QUANTITY = re.compile(
    r"(?P<sign>[+-])?"
    r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE]?)"
)


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse_quantity(text: str) -> Fraction:
    """Return the exact value of a Kubernetes quantity."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(f"{quote(text)} is not a Kubernetes quantity (like 512Ki, 32Mi, 1Gi or 1e6)")
    value = Fraction(match["number"])
    suffix = match["suffix"]
    if suffix in _BINARY:
        value *= 1024 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        value *= Fraction(10) ** _DECIMAL[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > 1000:
            # Far outside int64 either way; refuse before building a huge integer.
            raise QuantityError(f"quantity {quote(text)} is out of range")
        value *= Fraction(10) ** exponent
    return -value if match["sign"] == "-" else value


def parse_byte_count(text: str) -> int:
    """Return a quantity that must be a positive whole number of bytes within int64."""
    try:
        value = parse_quantity(text)
    except QuantityError:
        raise QuantityError(
            f"{quote(text)} is not a positive whole byte count (not a Kubernetes quantity)") from None
    if value.denominator != 1 or value <= 0 or value > INT64_MAX:
        raise QuantityError(f"{quote(text)} is not a positive whole byte count")
    return int(value)


def format_binary_si(count: int) -> str:
    """Canonical BinarySI form, as ``resource.NewQuantity(n, resource.BinarySI).String()``.

    Kubernetes prints values under 1024 (and values not divisible by 1024)
    without a suffix and otherwise uses the largest power of 1024 that divides
    the value, so 98.5Mi is printed ``100864Ki``.
    """
    if -1024 < count < 1024:
        return str(count)
    magnitude, exponent = abs(count), 0
    suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
    while magnitude % 1024 == 0 and exponent < len(suffixes) - 1:
        magnitude //= 1024
        exponent += 1
    sign = "-" if count < 0 else ""
    return f"{sign}{magnitude}{suffixes[exponent]}"


def format_size(count: int) -> str:
    """Human form for tables: the largest binary unit, at most two decimals (``98.5Mi``)."""
    if count < 1024:
        return f"{count}B" if count != 0 else "0"
    units = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
    value = Fraction(count)
    unit = ""
    for candidate in units:
        if value < 1024:
            break
        value /= 1024
        unit = candidate
    text = f"{float(value):.2f}".rstrip("0").rstrip(".")
    return f"{text}{unit}"
