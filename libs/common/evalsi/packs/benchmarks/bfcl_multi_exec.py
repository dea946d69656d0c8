"""BFCL's multi-turn checker, as pure functions over the native simulators (``bfcl_multi_sim``).

As bfcl-eval's ``multi_turn_checker``: the model's calls (per turn, per step) run on one set of simulators started
from the question's ``initial_config``, the possible answer's calls on another, both kept from turn to turn. After
each turn whose possible answer has calls: the model must have made a call in that turn
(``multi_turn:empty_turn_model_response``), every simulator's public attributes must equal the possible answer's
(``multi_turn:instance_state_mismatch``), and every result of the turn's expected calls must be among the results
of all the model's calls so far, each matched once (``multi_turn:execution_response_mismatch``). A model that
answered a different number of turns fails first (``multi_turn:force_terminated``).

A call runs as BFCL's ``execute_multi_turn_func_call`` runs it, without ``eval``: the method of the involved class
that has that name (a later class's wins, as in BFCL's mapping), its result as text (a string as is, a dict as its
JSON, anything else ``str()``), an exception as ``Error during execution: <message>``. BFCL evaluates a call as
Python source; here a name that is no simulator's method is ``name '<name>' is not defined`` (where BFCL would call
a Python built-in of that name), and a value is never code.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

from evalsi.packs.benchmarks.bfcl_ast import Verdict
from evalsi.packs.benchmarks.bfcl_multi_sim import new_simulator, public_methods, public_state

# BFCL refuses these names before evaluating a call
_BLOCKED = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
MAX_CALLS = 2_000  # calls executed for one record, model's and possible answer's together
MAX_DEPTH = 8  # nesting of calls inside a call's arguments


@dataclass(frozen=True)
class Call:
    """One call to execute: a name, its arguments (positional ones only in possible answers), and whether a dict
    argument whose values are all dicts is a nested call (BFCL's prompting decoder writes it so) or a dict."""

    name: str
    kwargs: Mapping[str, Any]
    args: tuple[Any, ...] = ()
    nested_calls: bool = False


Step = list[Call]  # the calls of one model answer
Turn = list[Step]  # a user turn's steps (answers that decoded to no call are left out, as BFCL leaves them)


def parse_ground_truth(source: str) -> Call:
    """A possible answer's call (``"cd(folder='x')"``, ``"sort('a.pdf')"``): a name and literal arguments."""
    try:
        node = ast.parse(source.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"possible answer call {source[:100]!r}: not a call: {exc.msg}") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"possible answer call {source[:100]!r}: expected name(arguments)")
    try:
        args = tuple(ast.literal_eval(arg) for arg in node.args)
        kwargs = {str(kw.arg): ast.literal_eval(kw.value) for kw in node.keywords}
    except ValueError:
        raise ValueError(f"possible answer call {source[:100]!r}: arguments must be literals") from None
    if any(kw.arg is None for kw in node.keywords):
        raise ValueError(f"possible answer call {source[:100]!r}: ** arguments are not read")
    return Call(node.func.id, kwargs, args)


@dataclass
class Simulators:
    """One side's simulators (the model's or the possible answer's), created on first use and kept across turns."""

    initial_config: Mapping[str, Any]
    classes: Sequence[str]
    long_context: bool
    instances: dict[str, Any] = field(default_factory=dict)
    methods: dict[str, Any] = field(default_factory=dict)

    def start(self) -> None:
        if self.instances:
            return
        for class_name in self.classes:
            config = self.initial_config.get(class_name, {})
            instance = new_simulator(class_name, dict(config) if isinstance(config, Mapping) else {},
                                     long_context=self.long_context)
            self.instances[class_name] = instance
            for name in public_methods(instance):
                self.methods[name] = getattr(instance, name)

    def execute(self, calls: Sequence[Call]) -> list[str]:
        self.start()
        return [self._result(call) for call in calls]

    def _result(self, call: Call) -> str:
        try:
            if call.name.split(".")[-1] in _BLOCKED:
                raise PermissionError(f"Function call {call.name.split('.')[-1]} is not allowed.")
            value = self._invoke(call.name, call.args, call.kwargs, call.nested_calls, 0)
            return _text(value)
        except Exception as exc:  # any error of the call or of its text is its result, as in BFCL
            return f"Error during execution: {exc}"

    def _invoke(self, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], nested: bool, depth: int) -> Any:
        method = self.methods.get(name)
        if method is None:
            raise NameError(f"name '{name.split('.')[0]}' is not defined")
        if depth > MAX_DEPTH:
            raise RecursionError(f"calls nested more than {MAX_DEPTH} deep")
        # BFCL evaluates a call's source, so its arguments are new objects each time; a parsed call here is shared
        # (a question's records share its possible answer) and a simulator may keep and change an argument
        # (TwitterAPI's mention extends a posted tweet's mentions list), so each call gets its own copy
        values = {key: self._value(value, nested, depth) for key, value in deepcopy(dict(kwargs)).items()}
        return method(*deepcopy(args), **values)

    def _value(self, value: Any, nested: bool, depth: int) -> Any:
        # BFCL's prompting decoder writes a dict whose values are all dicts as a call of its first key
        if nested and isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            name, arguments = next(iter(value.items()))
            return self._invoke(str(name), (), arguments, nested, depth + 1)
        if nested and isinstance(value, dict):
            return {str(key): self._value(item, nested, depth) for key, item in value.items()}
        return value


def _text(value: Any) -> str:
    """A call's result as BFCL writes it: a string as is, a dict as its JSON (else ``str()``), anything else ``str()``
    (which fails for an int of more digits than Python prints, an error of the call there too)."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def check_multi_turn(turns: Sequence[Turn], ground_truth: Sequence[Sequence[Call]],
                     initial_config: Mapping[str, Any], classes: Sequence[str], category: str) -> Verdict:
    """BFCL's verdict for one multi-turn question (see the module's docstring). Raises ``NotBuiltError`` for a
    class with no simulator and ``ValueError`` for more than :data:`MAX_CALLS` calls."""
    long_context = "long_context" in category
    model = Simulators(initial_config, classes, long_context)
    expected = Simulators(initial_config, classes, long_context)
    model.start()  # a class with no simulator is refused whatever the answer
    expected.start()
    if len(turns) != len(ground_truth):
        return Verdict(False, "multi_turn:force_terminated",
                       f"Model was force-terminated during inference phase. The length of the model result turns "
                       f"({len(turns)}) does not match the length of the ground truth turns ({len(ground_truth)}).")
    count = sum(len(step) for turn in turns for step in turn) + sum(len(calls) for calls in ground_truth)
    if count > MAX_CALLS:
        raise ValueError(f"{count} calls to execute; at most {MAX_CALLS} are")
    all_model_results: list[str] = []
    for index, (turn, expected_calls) in enumerate(zip(turns, ground_truth, strict=True)):
        for step in turn:
            all_model_results.extend(model.execute(step))
        expected_results = expected.execute(expected_calls)
        if not expected_calls:
            continue  # a turn the model should not act on; its calls still ran, so the next turn sees them
        if not turn:
            return Verdict(False, "multi_turn:empty_turn_model_response",
                           f"Model response list is empty for turn {index}")
        for class_name, instance in expected.instances.items():
            ours, theirs = public_state(model.instances[class_name]), public_state(instance)
            differences = {key: {"model": ours.get(key), "ground_truth": value}
                           for key, value in theirs.items() if ours.get(key) != value}
            if differences:
                return Verdict(False, "multi_turn:instance_state_mismatch",
                               f"Model instance for {class_name} does not match the state with ground truth "
                               f"instance (turn {index}): {_shown(differences)}")
        missing = _missing(expected_results, all_model_results)
        if missing:
            return Verdict(False, "multi_turn:execution_response_mismatch",
                           f"Model response execution results so far does not contain all the ground truth "
                           f"response execution results for turn {index}. Missing: {_shown(missing)}")
    return Verdict(True)


def _missing(expected: Sequence[str], results: Sequence[str]) -> list[str]:
    """The expected results not among ``results``, each result matching one expected result at most."""
    left = list(results)
    missing = []
    for item in expected:
        try:
            left.remove(item)
        except ValueError:
            missing.append(item)
    return missing


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 1000 else text[:1000] + "..."


def call_source(call: Call) -> str:
    """A decoded call as BFCL's prompting mode writes it back (``decoded_output_to_execution_list``): the name the
    model sees beside its call's result."""
    return f"{call.name}({', '.join(f'{key}={_source(value)}' for key, value in call.kwargs.items())})"


def _source(value: Any) -> str:
    # BFCL's parse_nested_value: a dict whose values are all dicts is a nested call, any other dict a literal
    if isinstance(value, dict) and value and all(isinstance(item, dict) for item in value.values()):
        name, arguments = next(iter(value.items()))
        return f"{name}({', '.join(f'{key}={_source(item)}' for key, item in arguments.items())})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"'{key}': {_source(item)}" for key, item in value.items()) + "}"
    return repr(value)
