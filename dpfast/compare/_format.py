"""How the private pages and the command's summaries print a number: rounded, never raw.

Measured figures (metrics, risk, shares, noise scales) are shown to
:data:`SIGNIFICANT` significant digits; counts of rows and values are whole numbers and
shown exactly. The exact values stay in the pages' ``data-value`` attributes and JSON.
"""

from __future__ import annotations

import math

#: Significant digits of every measured figure shown on a page or printed.
SIGNIFICANT = 3


def rounded(value: float, digits: int = SIGNIFICANT) -> str:
    """Return ``value`` rounded to ``digits`` significant digits, as a reader writes it.

    Plain notation with thousands separators from 0.0001 up to a million, trailing
    zeros dropped; scientific notation outside that range; ``inf``, ``-inf`` and ``nan``
    as such.

    Examples
    --------
    >>> [rounded(v) for v in (0.0123456, 4.0, 0.30000000000000004, 123456.7, 2.5e-07)]
    ['0.0123', '4', '0.3', '123,000', '2.5e-07']
    >>> rounded(float("inf")), rounded(-0.0), rounded(1234.5, 5)
    ('inf', '0', '1,234.5')
    """
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    short = float(f"{value:.{digits}g}")
    magnitude = math.floor(math.log10(abs(short)))
    if not -4 <= magnitude < 6:
        mantissa, exponent = f"{short:.{digits - 1}e}".split("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{exponent}"
    decimals = max(0, digits - 1 - magnitude)
    text = f"{short:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def percent(share: float) -> str:
    """Return a share in ``[0, 1]`` as a rounded percentage: ``0.1234`` gives ``12.3 %``.

    Examples
    --------
    >>> percent(0.12345), percent(0.0), percent(1.0)
    ('12.3 %', '0 %', '100 %')
    """
    return f"{rounded(100.0 * share)} %"


def count(value: float) -> str:
    """Return a count of rows or values exactly, with thousands separators.

    Examples
    --------
    >>> count(30162.0), count(7)
    ('30,162', '7')
    """
    return f"{int(value):,}"
