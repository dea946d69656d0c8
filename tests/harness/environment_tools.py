"""A tool for the replay test of test_environment_cli.py (imported by name: tests/harness is on sys.path)."""

from __future__ import annotations


def weather_first(city: str) -> dict:
    """The weather, its keys in an order that is not sorted (as a real tool's may be)."""
    return {"temperature": 21, "city": city}
