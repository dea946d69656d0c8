"""BFCL's ``MathAPI`` simulator, native (bfcl-eval 2026.3.23's ``func_source_code/math_api.py``, method for method:
signatures, return values and error texts). It keeps no state, so BFCL loads no scenario into it and it has no
public attribute to compare.

Three deliberate differences, none of which changes a result BFCL can give in bounded time. BFCL sets the process's
own precision (``mpmath.mp.dps``, ``decimal.getcontext().prec``) before ``logarithm`` and ``square_root``; here each
call works in a context of its own, so a grader's call never changes another computation in the process. A
precision over :data:`MAX_PRECISION` digits is refused (``{"error": ...}``), where BFCL would compute for as long as
it takes. And an integer ``power`` or ``round_number`` too large to compute is not computed: a power whose result
would have more digits than Python prints (``sys.get_int_max_str_digits()``) fails with the text BFCL's result
fails with when it is printed, and rounding an integer to more places left than it has digits is 0.
"""

from __future__ import annotations

import math
import sys
from decimal import MAX_PREC, Context, Decimal, InvalidOperation
from typing import Any

import mpmath

MAX_PRECISION = 10_000  # digits of a logarithm or square root (bounds the work of one call)
_MAX_POWER_DIGITS = 100_000  # an integer power's digits computed where Python's limit on printed digits is off
_TO_METERS = {"km": 1000, "m": 1, "cm": 0.01, "mm": 0.001, "um": 1e-6, "nm": 1e-9}
_FROM_METERS = {unit: 1 / factor for unit, factor in _TO_METERS.items()}
_IMPERIAL = {"cm_to_in": 0.393701, "in_to_cm": 2.54, "m_to_ft": 3.28084, "ft_to_m": 0.3048, "m_to_yd": 1.09361,
             "yd_to_m": 0.9144, "km_to_miles": 0.621371, "miles_to_km": 1.60934, "kg_to_lb": 2.20462,
             "lb_to_kg": 0.453592, "celsius_to_fahrenheit": 1.8, "fahrenheit_to_celsius": 5 / 9}


def _refused(precision: Any) -> dict[str, str]:
    return {"error": f"precision {precision} is over {MAX_PRECISION} digits, the most this simulator computes"}


def _digits(precision: Any) -> int | None:
    """A precision as mpmath reads it (``int()`` of it: a float or a numeral string too), None where that fails
    (mpmath then fails as it does in BFCL)."""
    try:
        return int(precision)
    except (TypeError, ValueError, OverflowError):
        return None


class MathAPI:
    """BFCL's calculator: logarithms, statistics, unit conversions and arithmetic."""

    def logarithm(self, value: float, base: float, precision: int) -> dict[str, Any]:
        digits = _digits(precision)
        if digits is not None and digits > MAX_PRECISION:
            return _refused(precision)
        try:
            context = mpmath.MPContext()
            context.dps = precision
            return {"result": context.log(value) / context.log(base)}
        except Exception as exc:  # any error is the answer's text, as in BFCL
            return {"error": str(exc)}

    def mean(self, numbers: list[float]) -> dict[str, Any]:
        if not numbers:
            return {"error": "Cannot calculate mean of an empty list"}
        try:
            return {"result": sum(numbers) / len(numbers)}
        except TypeError:
            return {"error": "All elements in the list must be numbers"}

    def standard_deviation(self, numbers: list[float]) -> dict[str, Any]:
        if not numbers:
            return {"error": "Cannot calculate standard deviation of an empty list"}
        try:
            mean = sum(numbers) / len(numbers)
            variance = sum((x - mean) ** 2 for x in numbers) / len(numbers)
            return {"result": math.sqrt(variance)}
        except TypeError:
            return {"error": "All elements in the list must be numbers"}

    def si_unit_conversion(self, value: float, unit_in: str, unit_out: str) -> dict[str, Any]:
        if not isinstance(value, int | float):
            return {"error": "Value must be a number"}
        if unit_in not in _TO_METERS or unit_out not in _FROM_METERS:
            return {"error": f"Conversion from '{unit_in}' to '{unit_out}' is not supported"}
        try:
            return {"result": value * _TO_METERS[unit_in] * _FROM_METERS[unit_out]}
        except OverflowError:
            return {"error": "Conversion resulted in a value too large to represent"}

    def imperial_si_conversion(self, value: float, unit_in: str, unit_out: str) -> dict[str, Any]:
        if not isinstance(value, int | float):
            return {"error": "Value must be a number"}
        if unit_in == unit_out:
            return {"result": value}
        key = f"{unit_in}_to_{unit_out}"
        if key not in _IMPERIAL:
            return {"error": f"Conversion from '{unit_in}' to '{unit_out}' is not supported"}
        try:
            if unit_in == "celsius" and unit_out == "fahrenheit":
                result = (value * _IMPERIAL[key]) + 32
            elif unit_in == "fahrenheit" and unit_out == "celsius":
                result = (value - 32) * _IMPERIAL[key]
            else:
                result = value * _IMPERIAL[key]
            return {"result": result}
        except OverflowError:
            return {"error": "Conversion resulted in a value too large to represent"}

    def add(self, a: float, b: float) -> dict[str, Any]:
        try:
            return {"result": a + b}
        except TypeError:
            return {"error": "Both inputs must be numbers"}

    def subtract(self, a: float, b: float) -> dict[str, Any]:
        try:
            return {"result": a - b}
        except TypeError:
            return {"error": "Both inputs must be numbers"}

    def multiply(self, a: float, b: float) -> dict[str, Any]:
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return {"error": "Both inputs must be numbers"}
        return {"result": a * b}

    def divide(self, a: float, b: float) -> dict[str, Any]:
        try:
            if b == 0:
                return {"error": "Cannot divide by zero"}
            return {"result": a / b}
        except TypeError:
            return {"error": "Both inputs must be numbers"}

    def power(self, base: float, exponent: float) -> dict[str, Any]:
        _refuse_unprintable_power(base, exponent)
        try:
            return {"result": base**exponent}
        except TypeError:
            return {"error": "Both inputs must be numbers"}

    def square_root(self, number: float, precision: int) -> dict[str, Any]:
        try:
            if number < 0:
                return {"error": "Cannot calculate square root of a negative number"}
            # a precision decimal refuses (not an int, or over its MAX_PREC) fails below as it does in BFCL
            if type(precision) is int and MAX_PRECISION < precision <= MAX_PREC:
                return _refused(precision)
            context = Context(prec=precision)
            return {"result": Decimal(number).sqrt(context)}
        except (TypeError, InvalidOperation):
            return {"error": "Input must be a number or computation resulted in an invalid operation"}

    def absolute_value(self, number: float) -> dict[str, Any]:
        try:
            return {"result": abs(number)}
        except TypeError:
            return {"error": "Input must be a number"}

    def round_number(self, number: float, decimal_places: int = 0) -> dict[str, Any]:
        try:
            if _rounds_to_zero(number, decimal_places):
                return {"result": 0}
            return {"result": round(number, decimal_places)}
        except TypeError:
            return {"error": "First input must be a number, second input must be an integer"}

    def percentage(self, part: float, whole: float) -> dict[str, Any]:
        try:
            if whole == 0:
                return {"error": "Whole value cannot be zero"}
            return {"result": (part / whole) * 100}
        except TypeError:
            return {"error": "Both inputs must be numbers"}

    def min_value(self, numbers: list[float]) -> dict[str, Any]:
        if not numbers:
            return {"error": "Cannot find minimum of an empty list"}
        try:
            return {"result": min(numbers)}
        except TypeError:
            return {"error": "All elements in the list must be numbers"}

    def max_value(self, numbers: list[float]) -> dict[str, Any]:
        if not numbers:
            return {"error": "Cannot find maximum of an empty list"}
        try:
            return {"result": max(numbers)}
        except TypeError:
            return {"error": "All elements in the list must be numbers"}

    def sum_values(self, numbers: list[float]) -> dict[str, Any]:
        if not numbers:
            return {"error": "Cannot calculate sum of an empty list"}
        try:
            return {"result": sum(numbers)}
        except TypeError:
            return {"error": "All elements in the list must be numbers"}


def _refuse_unprintable_power(base: Any, exponent: Any) -> None:
    """Raise the error printing BFCL's result raises, without computing it, for an integer power with far more
    digits than Python prints (BFCL computes it first, for as long as that takes)."""
    if type(base) is not int or type(exponent) is not int or exponent <= 0 or abs(base) < 2:
        return
    limit = sys.get_int_max_str_digits()
    # log10 of the result, to within far less than the margin of 10 digits
    if exponent * math.log10(abs(base)) > (limit or _MAX_POWER_DIGITS) + 10:
        if not limit:
            raise ValueError(f"a power of over {_MAX_POWER_DIGITS} digits is not computed here")
        raise ValueError(f"Exceeds the limit ({limit} digits) for integer string conversion; "
                         "use sys.set_int_max_str_digits() to increase the limit")


def _rounds_to_zero(number: Any, places: Any) -> bool:
    """Whether ``round(number, places)`` of an integer is 0 because ``places`` reaches left of all its digits (Python
    computes ``10 ** -places`` first, which a large ``places`` makes unbounded)."""
    if not isinstance(number, int) or type(places) is not int or places >= 0:
        return False
    # 10 ** -places is then over twice |number|, so the nearest multiple is 0
    return -places > number.bit_length() * math.log10(2) + 2
