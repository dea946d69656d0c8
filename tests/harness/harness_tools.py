"""Python functions the harness tests load as tools ("harness_tools:get_weather")."""

from __future__ import annotations

import asyncio
import time
from typing import Literal


def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict:
    """The current weather in a city.

    Args:
        city: The city's name.
        unit: Celsius (c) or Fahrenheit (f).
    """
    return {"city": city, "temperature": 21 if unit == "c" else 70, "unit": unit}


async def add(a: int, b: int) -> int:
    """Add two integers."""
    await asyncio.sleep(0)
    return a + b


def slow(seconds: float) -> str:
    """Sleep, then answer (for timeouts and parallelism)."""
    time.sleep(seconds)
    return f"slept {seconds}"


def broken(reason: str) -> str:
    """Always raises."""
    raise RuntimeError(reason)
