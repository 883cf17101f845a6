"""Kubernetes resource quantities, read as k8s.io/apimachinery's ``resource.ParseQuantity``
reads them (``pkg/api/resource/quantity.go``).

The hook writes the JOB_CPU_* and JOB_MEMORY_* settings into every Job's resources. The
API server parses them with ParseQuantity and refuses the Job when it cannot, or when a
request is above its limit; so the same grammar decides here, and a request is compared
with its limit by the values the API server compares.
"""

from __future__ import annotations

import re
from decimal import ROUND_UP, Context, Decimal, MAX_EMAX, MIN_EMIN

EXPECTED_FORM = "a decimal number with an optional suffix (n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or e<exponent>)"

# quantity.go's grammar: <signedNumber><suffix>, a number being 1, 1.5, 1. or .5.
_QUANTITY = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?")
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# ParseQuantity keeps a value down to nano, and caps a binary-suffixed one at 2^63-1.
_NANO = Decimal("1e-9")
_BINARY_MAX = Decimal(2**63 - 1)
# The exponent of 1e<exponent> becomes a Go int32: past its range it would wrap around.
_EXPONENTS = range(-(2**31), 2**31)


class QuantityError(ValueError):
    """The text is no quantity; the message says what was expected."""


def parse_quantity(text: str) -> Decimal:
    """The exact value ParseQuantity gives ``text``: a non-zero value finer than nano is
    rounded away from zero to the next nano, and one with a binary suffix is capped at
    2^63-1. An exponent outside Go's int32 is refused: Kubernetes would silently wrap it
    into another number."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(f"expected {EXPECTED_FORM}, such as 500m or 512Mi")
    sign, number, suffix = match.group(1), match.group(2), match.group(3) or ""
    # Exact arithmetic: enough digits for every digit written, and any exponent.
    context = Context(prec=len(text) + 40, Emax=MAX_EMAX, Emin=MIN_EMIN)
    value = Decimal(sign + number)
    if suffix in _BINARY_EXPONENTS:
        value = context.multiply(value, Decimal(2 ** _BINARY_EXPONENTS[suffix]))
    else:
        value = context.scaleb(value, _decimal_exponent(suffix))
    if value and value.as_tuple().exponent < _NANO.as_tuple().exponent:  # type: ignore[operator]
        value = value.quantize(_NANO, rounding=ROUND_UP, context=context)
    if suffix in _BINARY_EXPONENTS and abs(value) > _BINARY_MAX:
        value = _BINARY_MAX.copy_sign(value)
    return value


def _decimal_exponent(suffix: str) -> int:
    """The power of ten a decimal suffix or ``e<exponent>`` stands for."""
    if suffix in _DECIMAL_EXPONENTS:
        return _DECIMAL_EXPONENTS[suffix]
    sign = "-" if suffix[1] == "-" else ""
    digits = suffix[1:].lstrip("+-").lstrip("0") or "0"
    # Its length first: Python refuses to read an integer of thousands of digits.
    if len(digits) > len(str(_EXPONENTS.stop)) or int(sign + digits) not in _EXPONENTS:
        raise QuantityError(f"its exponent is outside {_EXPONENTS.start}..{_EXPONENTS.stop - 1}, where Kubernetes would wrap it around")
    return int(sign + digits)
