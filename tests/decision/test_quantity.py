"""A quantity means what Kubernetes' ParseQuantity makes of it, and no other text is one.

The values follow quantity.go: its suffixes and exponents, its rounding of a value finer
than nano away from zero, and its cap of a binary-suffixed value at 2^63-1 ("8Ei").
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from hooks.quantity import QuantityError, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", "0"),
        ("1", "1"),
        ("+1", "1"),
        ("-1", "-1"),
        ("500m", "0.5"),
        ("0.7", "0.7"),
        (".5", "0.5"),
        ("5.", "5"),
        ("1n", "1e-9"),
        ("1u", "1e-6"),
        ("1k", "1000"),
        ("1M", "1e6"),
        ("1G", "1e9"),
        ("1T", "1e12"),
        ("1P", "1e15"),
        ("1E", "1e18"),
        ("1Ki", "1024"),
        ("1Mi", "1048576"),
        ("1.5Gi", "1610612736"),
        ("1Ti", str(2**40)),
        ("1Pi", str(2**50)),
        ("1Ei", str(2**60)),
        ("1e3", "1000"),
        ("1E3", "1000"),
        ("1e+3", "1000"),
        ("1e-3", "0.001"),
        ("12e-1", "1.2"),
        ("0.9n", "1e-9"),
        ("-0.9n", "-1e-9"),
        ("1.1n", "2e-9"),
        ("1e-20", "1e-9"),
        ("8Ei", str(2**63 - 1)),
        ("-8Ei", str(-(2**63 - 1))),
        ("10E", "1e19"),
        ("1e2147483647", "1e2147483647"),
        ("1e-2147483648", "1e-9"),
        ("1e" + "0" * 5000 + "3", "1000"),
        ("1e-" + "0" * 5000 + "3", "0.001"),
    ],
)
def test_quantity_has_the_value_kubernetes_gives_it(text: str, value: str) -> None:
    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize(
    "text",
    ["", ".", "-", "+", "1K", "1mi", "1ki", "1KI", "1e", "1e1.5", "1e3m", "1.5.5", "1 Gi", " 1", "1_000", "0x10", "Mi", "1Gib", "one", "1e+-3"],
)
def test_text_that_is_no_quantity_is_refused(text: str) -> None:
    with pytest.raises(QuantityError, match="^expected a decimal number with an optional suffix"):
        parse_quantity(text)


@pytest.mark.parametrize("text", ["1e2147483648", "1e-2147483649", "1e" + "1" * 5000, "1e-" + "1" * 5000])
def test_exponent_kubernetes_would_wrap_around_is_refused(text: str) -> None:
    with pytest.raises(QuantityError, match="exponent is outside -2147483648..2147483647"):
        parse_quantity(text)
