"""The tool of agent-harness.yaml's reference agent: "weather_tools:get_weather" (PYTHONPATH=examples/agents)."""

from __future__ import annotations


def get_weather(city: str) -> dict:
    """The current weather in a city.

    Args:
        city: The city's name.
    """
    return {"city": city, "temperature": 21}
