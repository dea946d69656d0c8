"""BFCL's long-context padding data: the values bfcl-eval 2026.3.23's ``func_source_code/long_context.py`` defines
(Apache-2.0), which its simulators add to their answers and states when a question is ``multi_turn_long_context``
(a watch list of 1,001 symbols, a car's metadata, 826 intermediary cities, 22 credit cards, ...).

``bfcl_long_context.json`` beside this module holds them, written by ``json.dumps`` of each of the module's
constants, in its order; tests/benchmarks_import/test_bfcl_multi_twitter_travel.py holds every value equal to
bfcl-eval's. One value is not JSON: BFCL's ``WATCH_LIST_EXTENSION`` ends with Python's ``...`` (a stray ellipsis in
its source), which its ``get_watchlist`` returns as ``Ellipsis``; :func:`long_context_data` puts it back.

The data is read once, on the first long-context question. BFCL's classes put these module-level objects
themselves into their state (a padding credit card's dict in every ``TravelAPI``'s ``credit_card_list``), so a
change one simulator makes shows in every other; a simulator here takes its own copy (:func:`padding`).
"""

from __future__ import annotations

import json
from copy import deepcopy
from functools import cache
from pathlib import Path
from typing import Any

_FILE = Path(__file__).with_name("bfcl_long_context.json")


@cache
def long_context_data() -> dict[str, Any]:
    """Every constant of BFCL's ``long_context.py`` by its name. Shared: read it, never change it."""
    data: dict[str, Any] = json.loads(_FILE.read_text(encoding="utf-8"))
    data["WATCH_LIST_EXTENSION"].append(...)
    return data


def padding(name: str) -> Any:
    """A copy of one constant (``"CREDIT_CARD_EXTENSION"``), for a simulator that keeps or changes it."""
    return deepcopy(long_context_data()[name])
