"""builtin/bfcl-multi-turn against BFCL's own code (bfcl-eval 2026.3.23, installed without its dependencies by
scripts/test.sh): the native simulators against BFCL's ``MessageAPI`` and ``TicketAPI`` on the same generated call
sequences (every result's text and the public state after every call), and the whole verdict against BFCL's
``_evaluate_single_multi_turn_entry`` (its decoders, ``multi_turn_checker`` and ``execute_multi_turn_func_call``)
on generated questions answered in BFCL's prompting format and as function calls, right and perturbed."""

from __future__ import annotations

import json
import random
import sys
import types
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import evalsi
from benchmarks_import.test_bfcl_relevance import BFCL, _bfcl_function
from evalsi.packs.benchmarks.bfcl_multi_exec import Call, Simulators, parse_ground_truth
from evalsi.packs.benchmarks.bfcl_multi_sim import public_state
from evalsi.records import from_value

DATA = BFCL / "data"

CLASSES = ("MessageAPI", "TicketAPI", "TradingBot", "VehicleControlAPI")
USERS = ("Ana", "Bor", "Cene", "Alice", "Zoe", "")
USER_IDS = ("USR001", "USR002", "USR003", "USR004", "USR005", "USR999", "")
TEXTS = ("Lunch at noon?", "VPN is back.", "lunch", "printer", "", "Ünïcode ✓")
STATUSES = ("Open", "Closed", "Resolved", "open", "", None)
FIELDS = ("title", "description", "status", "priority", "owner")
CONFIGS: tuple[dict[str, Any], ...] = (
    {},
    {"MessageAPI": {"user_count": 3, "user_map": {"Ana": "USR001", "Bor": "USR002", "Cene": "USR003"},
                    "inbox": [{"USR002": "Lunch at noon?"}], "message_count": 1, "current_user": "USR001"},
     "TicketAPI": {"ticket_queue": [{"id": 1, "title": "Printer jam", "description": "Floor 2", "status": "Open",
                                     "priority": 2, "created_by": "ana"}], "ticket_counter": 2, "current_user": "ana"}},
    {"MessageAPI": {"generated_ids": [12345], "current_user": "USR002", "random_seed": 7,
                    "inbox": [{"USR003": "printer"}, {}]},
     "TicketAPI": {"ticket_queue": [{"id": 2, "title": "x", "description": "", "status": "Resolved", "priority": 5,
                                     "created_by": "bo"}], "ticket_counter": 3},
     "TradingBot": {"authenticated": True, "market_status": "Open", "random_seed": 3, "watch_list": ["AAPL"],
                    "orders": {"7": {"id": 7, "order_type": "Buy", "symbol": "NVDA", "price": 1.5, "amount": 2,
                                     "status": "Open"}}, "order_counter": 8,
                    "account_info": {"account_id": 1, "balance": 500.0, "binding_card": 1}}},
    # questions' own, from BFCL's data (TradingBot's and VehicleControlAPI's states as its questions start them)
    *(next(row["initial_config"] for line in (DATA / "BFCL_v4_multi_turn_base.json").read_text().splitlines()
           if name in (row := json.loads(line))["initial_config"]) for name in ("TradingBot", "VehicleControlAPI")),
    {"VehicleControlAPI": {"engineState": "running", "doorStatus": {"driver": "locked", "passenger": "locked",
                                                                    "rear_left": "locked", "rear_right": "locked"},
                           "brakePedalStatus": "pressed", "brakePedalForce": 1000.0, "fuelLevel": 10.5,
                           "random_seed": 5}},
)
DOORS = ("driver", "passenger", "rear_left", "rear_right")
CITIES = ("Rivermist", "Stonebrook", "San Francisco", "Silverpine", "Nowhere")
ZIPCODES = ("83214", "74532", "94016", "62947", "08540", "00000")


def perturbed(rng: random.Random, arguments: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments, now and then wrong: a required one left out (4%), or an unknown one added (4%)."""
    roll = rng.random()
    if roll < 0.04 and arguments:
        arguments.pop(next(iter(arguments)))
    elif roll < 0.08:
        arguments["unknown"] = 1
    return arguments


def _arguments(rng: random.Random, name: str) -> dict[str, Any]:
    """Arguments for ``name``, mostly valid, sometimes of a wrong type, missing or unknown."""
    one = rng.choice
    table: dict[str, dict[str, Any]] = {
        "get_user_id": {"user": one(USERS)}, "message_login": {"user_id": one(USER_IDS)},
        "send_message": {"receiver_id": one(USER_IDS), "message": one(TEXTS)},
        "delete_message": {"receiver_id": one(USER_IDS)}, "add_contact": {"user_name": one(USERS)},
        "search_messages": {"keyword": one(TEXTS)},
        "create_ticket": {"title": one(TEXTS), **({"description": one(TEXTS)} if rng.random() < 0.5 else {}),
                          **({"priority": one((1, 3, 5, 0, 6, 2.5))} if rng.random() < 0.7 else {})},
        "get_ticket": {"ticket_id": one((1, 2, 3, 9, "1"))}, "close_ticket": {"ticket_id": one((1, 2, 3, 9))},
        "resolve_ticket": {"ticket_id": one((1, 2, 3)), "resolution": one(TEXTS)},
        "edit_ticket": {"ticket_id": one((1, 2, 3)), "updates": {
            field: one(("New", 4, None)) for field in rng.sample(FIELDS, rng.randint(1, 3))}},
        "ticket_login": {"username": one(("ana", "", "bo")), "password": one(("pw", ""))},
        "get_user_tickets": {"status": one(STATUSES)} if rng.random() < 0.7 else {},
        "get_symbol_by_name": {"name": one(("Apple", "Nvidia", "Zeta Corp", "Unknown"))},
        "get_stock_info": {"symbol": one(SYMBOLS)}, "get_order_details": {"order_id": one(ORDER_IDS)},
        "cancel_order": {"order_id": one(ORDER_IDS)},
        "place_order": {"order_type": one(("Buy", "Sell", "buy")), "symbol": one(SYMBOLS),
                        "price": one((0, 100.5, 227.16, 1e6, -1)), "amount": one((0, 1, 10, 1000))},
        "withdraw_funds": {"amount": one((0, 50.0, 20000.0, -5))}, "fund_account": {"amount": one((0, 50.0, -5))},
        "trading_login": {"username": "u", "password": "p"},
        "remove_stock_from_watchlist": {"symbol": one(SYMBOLS)}, "add_to_watchlist": {"stock": one(SYMBOLS)},
        "get_transaction_history": {key: one(("2024-09-01", "2024-09-03", "2024-13-01", None))
                                    for key in rng.sample(("start_date", "end_date"), rng.randint(0, 2))},
        "get_available_stocks": {"sector": one(("Technology", "Automobile", "Food"))},
        "filter_stocks_by_price": {"stocks": rng.sample(SYMBOLS, 3), "min_price": one((0, 200.0)),
                                   "max_price": one((300, 1000.5))},
        "notify_price_change": {"stocks": rng.sample(SYMBOLS, 3), "threshold": one((0.1, 0.2, 5))},
        "startEngine": {"ignitionMode": one(("START", "STOP", "ON"))},
        "fillFuelTank": {"fuelAmount": one((-1, 10, 45.5, 60))},
        "lockDoors": {"unlock": one((True, False)),
                      "door": rng.sample(DOORS, rng.randint(1, 4)) + (["trunk"] if rng.random() < 0.05 else [])},
        "adjustClimateControl": {"temperature": one((22, 70.5)), **({"unit": one(("celsius", "fahrenheit"))}
                                                                  if rng.random() < 0.5 else {}),
                                 **({"fanSpeed": one((30, 120))} if rng.random() < 0.5 else {})},
        "setHeadlights": {"mode": one(("on", "off", "auto", "dim"))},
        "displayCarStatus": {"option": one(("fuel", "battery", "doors", "climate", "headlights", "parkingBrake",
                                            "brakePedal", "engine", "radio"))},
        "activateParkingBrake": {"mode": one(("engage", "release", "hold"))},
        "pressBrakePedal": {"pedalPosition": one((0, 0.5, 1, 1.0, 1.5))},
        "setCruiseControl": {"speed": one((65, 67, 130)), "activate": one((True, False)),
                             "distanceToNextVehicle": one((100, 40.5))},
        "estimate_drive_feasibility_by_mileage": {"distance": one((100, 2000))},
        "liter_to_gallon": {"liter": one((10, 2.5))}, "gallon_to_liter": {"gallon": one((3, 0.5))},
        "estimate_distance": {"cityA": one(ZIPCODES), "cityB": one(ZIPCODES)},
        "get_zipcode_based_on_city": {"city": one(CITIES)}, "set_navigation": {"destination": one(CITIES)},
        "display_log": {"messages": rng.sample(TEXTS, 2)},
    }
    arguments = table.get(name, {})
    return perturbed(rng, arguments)


METHODS = ("list_users", "get_user_id", "message_login", "message_get_login_status", "send_message",
           "delete_message", "view_messages_sent", "add_contact", "search_messages", "get_message_stats",
           "create_ticket", "get_ticket", "close_ticket", "resolve_ticket", "edit_ticket", "ticket_login",
           "ticket_get_login_status", "logout", "get_user_tickets", "get_current_time", "get_symbol_by_name",
           "get_stock_info", "get_order_details", "cancel_order", "place_order", "withdraw_funds", "get_account_info",
           "trading_login", "trading_get_login_status", "trading_logout", "fund_account",
           "remove_stock_from_watchlist", "get_watchlist", "get_order_history", "get_transaction_history",
           "get_available_stocks", "filter_stocks_by_price", "add_to_watchlist", "notify_price_change",
           "startEngine", "fillFuelTank", "lockDoors", "adjustClimateControl", "get_outside_temperature_from_google",
           "get_outside_temperature_from_weather_com", "setHeadlights", "displayCarStatus", "activateParkingBrake",
           "pressBrakePedal", "releaseBrakePedal", "setCruiseControl", "get_current_speed", "display_log",
           "estimate_drive_feasibility_by_mileage", "liter_to_gallon", "gallon_to_liter", "estimate_distance",
           "get_zipcode_based_on_city", "set_navigation", "check_tire_pressure", "find_nearest_tire_shop")
SYMBOLS = ("AAPL", "GOOG", "NVDA", "ZETA", "XXXX")
ORDER_IDS = (12345, 12446, 12447, 7, "12345")


def _call(rng: random.Random) -> dict[str, dict[str, Any]]:
    roll = rng.random()
    name = "not_a_method" if roll < 0.03 else "run" if roll < 0.05 else rng.choice(METHODS)
    return {name: _arguments(rng, name)}


@pytest.fixture(scope="module")
def bfcl() -> types.SimpleNamespace:
    """BFCL's executor, decoders and per-entry multi-turn verdict."""
    for parser in ("java_parser", "js_parser"):  # tree-sitter parsers for Java and JavaScript, never used here
        stand_in = types.ModuleType(f"bfcl_eval.model_handler.parser.{parser}")
        stand_in.parse_java_function_call = stand_in.parse_javascript_function_call = None  # type: ignore[attr-defined]
        sys.modules.setdefault(stand_in.__name__, stand_in)
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # type: ignore[import-untyped]
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (  # type: ignore[import-untyped]
        multi_turn_checker,
    )
    from bfcl_eval.model_handler.utils import (  # type: ignore[import-untyped]
        convert_to_function_call,
        default_decode_execute_prompting,
    )

    evaluate_entry = _bfcl_function(
        BFCL / "eval_checker" / "eval_runner.py", "_evaluate_single_multi_turn_entry",
        {"multi_turn_checker": multi_turn_checker,
         "is_empty_execute_response": multi_turn_utils.is_empty_execute_response})
    return types.SimpleNamespace(utils=multi_turn_utils, evaluate_entry=evaluate_entry,
                                 fc=convert_to_function_call, prompting=default_decode_execute_prompting)


def _forget(utils: Any, model: str) -> None:
    """Drop BFCL's simulator instances of one check: it keeps them in its module's globals by model and entry."""
    for key in [key for key in vars(utils) if key.startswith(model)]:
        del vars(utils)[key]


def test_the_simulators_equal_bfcls_on_generated_call_sequences(bfcl: types.SimpleNamespace) -> None:
    rng = random.Random(16)
    calls = 0
    errors = 0
    for sequence in range(400):
        config = rng.choice(CONFIGS)
        classes = list(rng.sample(CLASSES, rng.randint(1, 4)))
        ours = Simulators(config, classes, long_context=False)
        model = f"m{uuid.uuid4().hex}"
        try:
            for _ in range(rng.randint(1, 12)):
                call = _call(rng)
                (name, arguments), = call.items()
                result = ours.execute([Call(name, arguments)])
                theirs, instances = bfcl.utils.execute_multi_turn_func_call(
                    bfcl.fc([call]), config, classes, model, f"seq_{sequence}")
                assert result == theirs, (sequence, call)
                for class_name, instance in instances.items():
                    expected = {k: v for k, v in vars(instance).items() if not k.startswith("_")}
                    assert public_state(ours.instances[class_name]) == expected, (sequence, call, class_name)
                calls += 1
                errors += result[0].startswith("Error during execution")
        finally:
            _forget(bfcl.utils, model)
    assert calls > 800 and 20 < errors < calls / 2  # errors (wrong arguments, unknown names) are exercised too


def _text(step: list[dict[str, dict[str, Any]]]) -> str:
    """A step in BFCL's prompting format."""
    return "[" + ", ".join(f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
                           for call in step for name, args in call.items()) + "]"


def _truth_call(rng: random.Random, call: dict[str, dict[str, Any]]) -> str:
    """A possible answer's call string, as BFCL writes them (sometimes a first argument positional)."""
    (name, arguments), = call.items()
    parts = [f"{k}={v!r}" for k, v in arguments.items()]
    if parts and rng.random() < 0.2:
        parts[0] = repr(next(iter(arguments.values())))
    return f"{name}({','.join(parts)})"


def _question(rng: random.Random, index: int) -> tuple[dict[str, Any], list[list[str]], list[list[Any]]]:
    """A question (its entry), its possible answer, and the calls per turn that answer it."""
    classes = list(rng.sample(CLASSES, rng.randint(1, 4)))
    category = rng.choice(("multi_turn_base", "multi_turn_miss_func", "multi_turn_long_context"))
    turns = rng.randint(1, 4)
    calls = [[_call(rng) for _ in range(rng.randint(0 if turn and rng.random() < 0.2 else 1, 3))]
             for turn in range(turns)]
    entry = {"id": f"{category}_{index}", "initial_config": rng.choice(CONFIGS),
             "involved_classes": classes}
    return entry, [[_truth_call(rng, call) for call in turn] for turn in calls], calls


def _perturbed(rng: random.Random, calls: list[list[Any]]) -> list[list[Any]]:
    """The answer's calls, per turn, changed in one of the ways a model gets it wrong (or not at all)."""
    turns = [list(turn) for turn in calls]
    roll = rng.random()
    if roll < 0.3:
        return turns
    turn = rng.randrange(len(turns))
    if roll < 0.45 and turns[turn]:
        turns[turn].pop(rng.randrange(len(turns[turn])))  # a call left out
    elif roll < 0.6:
        turns[turn].insert(rng.randint(0, len(turns[turn])), _call(rng))  # an extra call
    elif roll < 0.7 and turns[turn]:
        turns[turn].reverse()  # the order changed
    elif roll < 0.8 and turn + 1 < len(turns):
        turns[turn + 1][:0] = turns[turn]  # a turn's calls made a turn late
        turns[turn] = []
    elif roll < 0.9:
        turns.append([]) if rng.random() < 0.5 else turns.pop()  # a turn too many or too few
    elif turns[turn]:
        (name, _given), = turns[turn][0].items()
        turns[turn][0] = {name: _arguments(rng, name)}  # other arguments
    return turns


def _steps(rng: random.Random, turn: list[Any], prompting: bool) -> list[Any]:
    """A turn's calls as the model's answers (steps): split across steps, with answers that hold no call."""
    steps: list[Any] = []
    rest = list(turn)
    while rest:
        size = rng.randint(1, len(rest))
        step, rest = rest[:size], rest[size:]
        steps.append(_text(step) if prompting else [{n: json.dumps(a)} for call in step for n, a in call.items()])
    if rng.random() < 0.3:
        noise: Any = rng.choice(("I have done that.", "[]", "[edit_ticket(ticket_id=1, updates={})]",
                            "[edit_ticket(ticket_id=1, updates={'get_ticket': {'ticket_id': 1}})]")) if prompting \
            else []
        steps.insert(rng.randint(0, len(steps)), noise)
    return steps


def _cases(seed: int, count: int) -> Iterator[tuple[dict[str, Any], list[list[str]], list[list[Any]], bool]]:
    rng = random.Random(seed)
    for index in range(count):
        entry, truth, calls = _question(rng, index)
        prompting = rng.random() < 0.6
        yield entry, truth, [_steps(rng, turn, prompting) for turn in _perturbed(rng, calls)], prompting


def _bfcl_verdict(bfcl: types.SimpleNamespace, entry: dict[str, Any], truth: list[list[str]], result: list[Any],
                  prompting: bool) -> tuple[bool, str]:
    decode: Callable[..., Any] = bfcl.prompting if prompting else bfcl.fc
    handler = types.SimpleNamespace(decode_execute=lambda step, has_tool_call_tag: decode(step))
    model = f"m{uuid.uuid4().hex}"
    try:
        verdict = bfcl.evaluate_entry(handler, entry["id"], result, truth, dict(entry), model,
                                      entry["id"].rsplit("_", 1)[0])
    finally:
        _forget(bfcl.utils, model)
    return bool(verdict["valid"]), "" if verdict["valid"] else verdict["error"]["error_type"]


def test_the_verdicts_equal_bfcls_on_generated_questions(bfcl: types.SimpleNamespace) -> None:
    records, expected = [], []
    for entry, truth, result, prompting in _cases(2026, 600):
        expected.append(_bfcl_verdict(bfcl, entry, truth, result, prompting))
        reference = {"category": entry["id"].rsplit("_", 1)[0], "ground_truth": truth,
                     "initial_config": entry["initial_config"], "involved_classes": entry["involved_classes"]}
        records.append({"id": entry["id"], "output": {"json": result}, "reference": json.dumps(reference)})
    results = {r.record_id: r for r in evalsi.evaluate(records, ["builtin/bfcl-multi-turn"]).results}
    ours = [(results[r["id"]].scores[0].passed, results[r["id"]].scores[0].explanation.partition(": ")[0])
            for r in records]
    mismatches = [(i, o, e) for i, (o, e) in enumerate(zip(ours, expected, strict=True)) if o != e]
    assert not mismatches, mismatches[:5]
    kinds = {error for _valid, error in expected}
    assert {"", "multi_turn:force_terminated", "multi_turn:empty_turn_model_response",
            "multi_turn:instance_state_mismatch", "multi_turn:execution_response_mismatch"} <= kinds
    passed = sum(valid for valid, _error in expected)
    assert 100 < passed < 500


def _answers(rng: random.Random, truth: list[list[str]]) -> list[list[list[str]]]:
    """A question's possible answer given back as a model's text steps (a step per turn), and changed: a call left
    out, a turn's calls made a turn late, a turn missing."""
    right = [[f"[{', '.join(turn)}]"] if turn else ["There is nothing I can do with these functions."]
             for turn in truth]
    busy = [i for i, turn in enumerate(truth) if turn]
    turn = rng.choice(busy)
    dropped = [list(calls) for calls in truth]
    dropped[turn].pop(rng.randrange(len(dropped[turn])))
    late = [list(calls) for calls in truth]
    if turn + 1 < len(late):
        late[turn + 1][:0], late[turn] = late[turn], []
    return [right, *([[f"[{', '.join(c)}]"] if c else [] for c in changed] for changed in (dropped, late)),
            right[:-1]]


def test_the_verdicts_equal_bfcls_on_bfcls_own_questions(bfcl: types.SimpleNamespace) -> None:
    from evalsi.datasets import load_dataset

    rng = random.Random(3)
    records: list[dict[str, Any]] = []
    expected = []
    read = 0
    for category in ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param"):
        for record in load_dataset(f"bfcl://{DATA}/{category}"):
            read += 1
            reference = json.loads(record.reference.text)
            truth = [[parse_ground_truth(call) for call in turn] for turn in reference["ground_truth"]]
            if not set(reference["involved_classes"]) <= set(CLASSES):
                continue
            assert len(truth) == len(from_value(record.metadata["bfcl_turns"]))
            entry = {"id": record.id, "initial_config": reference["initial_config"],
                     "involved_classes": reference["involved_classes"]}
            for index, answer in enumerate(_answers(rng, reference["ground_truth"])):
                expected.append(_bfcl_verdict(bfcl, entry, reference["ground_truth"], answer, True))
                records.append({"id": f"{record.id}/{index}", "output": {"json": answer},
                                "reference": record.reference.text})
    results = {r.record_id: r for r in evalsi.evaluate(records, ["builtin/bfcl-multi-turn"]).results}
    ours = [(results[r["id"]].scores[0].passed, results[r["id"]].scores[0].explanation.partition(": ")[0])
            for r in records]
    mismatches = [(records[i]["id"], o, e) for i, (o, e) in enumerate(zip(ours, expected, strict=True)) if o != e]
    assert not mismatches, mismatches[:5]
    assert read == 3 * 200 and len(records) == 4 * 3 * 72  # 72 of each file's 200 involve only classes built here
    right = [valid for record, (valid, _error) in zip(records, expected, strict=True) if record["id"].endswith("/0")]
    assert sum(right) > 100  # BFCL's possible answers pass (those with positional arguments, which BFCL's decoder
    # drops from a model's text, fail in both)
