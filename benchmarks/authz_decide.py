"""What authorization costs a call: ``Authorizer.decide`` CPU per decision, in one process, no transport.

Cases: a built-in role and no rules; §17's four example rules (run by the direct evaluator); the same rules on
cel-python alone (what every rule cost before the direct evaluator); a ``cel:`` binding; a custom role with a
condition; a condition outside the direct evaluator's subset (``exists``). Prints microseconds of process CPU and
of wall time per decision, and the load average (the machine is shared).

    .venv/bin/python benchmarks/authz_decide.py [--decisions 2000]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from evalsi.auth.principal import Principal
from evalsi.authz.authorizer import Authorizer
from evalsi.authz.decision import AccessRequest
from evalsi.authz.expressions import Activation

# A decision of built-in roles and §17's example rules may cost what a cached token check does.
TARGET_US = 50.0
RULES = [
    {"deny": 'request.action == "runs.create" && resource.target.connector == "anthropic" && '
             '!("llm-spenders" in principal.groups)'},
    {"require": '!resource.runs_code || "sandbox-users" in principal.groups'},
    {"require": 'request.action != "runs.cancel" || principal.id == resource.run.created_by || '
                '"admin" in principal.roles'},
    {"allow": 'jwt.iss == "https://token.actions.githubusercontent.com" && jwt.repository == "acme/agent" && '
              'request.action in ["runs.create", "runs.read"] && resource.project == "agent-ci"'},
]
BINDINGS = {"p": {"runner": ["group:corp/eng"]}}
ALICE = Principal(kind="user", provider="corp", subject="alice", groups=("eng",), claims={"iss": "corp"})
REQUEST = AccessRequest(ALICE, "runs.create", "p", {
    "target": {"kind": "model", "connector": "openai", "model": "qwen3", "connection": ""},
    "run": {"id": "", "name": "r", "created_by": "", "labels": {}}, "evaluators": ["exact-match"],
})


def _cases() -> dict[str, Authorizer]:
    return {
        "built-in role, no rules": Authorizer.from_config({"projects": BINDINGS}, None),
        "§17's four rules": Authorizer.from_config({"projects": BINDINGS}, {"rules": RULES}),
        "a cel: binding": Authorizer.from_config(
            {"projects": {"p": {"runner": ['cel:"eng" in principal.groups && jwt.iss == "corp"']}}}, None),
        "a role condition": Authorizer.from_config(
            {"roles": [{"name": "qwen", "permissions": ["runs.create"],
                        "condition": 'resource.target.model in ["qwen3"]'}],
             "projects": {"p": {"qwen": ["group:corp/eng"]}}}, None),
        "a condition on cel-python (exists)": Authorizer.from_config(
            {"roles": [{"name": "eng", "permissions": ["runs.create"],
                        "condition": 'principal.groups.exists(g, g == "eng")'}],
             "projects": {"p": {"eng": ["group:corp/eng"]}}}, None),
    }


def _per_call(run: Any, count: int) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        run()
    return 1e6 * (time.process_time() - cpu) / count, 1e6 * (time.perf_counter() - wall) / count


def main(decisions: int) -> None:
    print(f"load average {os.getloadavg()[0]:.1f}; {decisions} decisions per case (fewer on cel-python)")
    for name, authorizer in _cases().items():
        assert authorizer.decide(REQUEST).allowed, name
        count = decisions if "cel-python" not in name else max(decisions // 20, 20)
        cpu, wall = _per_call(lambda a=authorizer: a.decide(REQUEST), count)
        print(f"  {name:<40} {cpu:8.1f} us CPU {wall:8.1f} us wall")
    rules = _cases()["§17's four rules"].rules
    slow = [*rules.deny, *rules.require]

    def on_cel_python() -> None:
        activation = Activation(REQUEST, ["runner"])
        for rule in slow:
            rule.expression.holds_in_cel(activation)

    cpu, wall = _per_call(on_cel_python, max(decisions // 20, 20))
    print(f"  {'the same rules on cel-python alone':<40} {cpu:8.1f} us CPU {wall:8.1f} us wall")
    print(f"target: built-in roles with §17's rules <= {TARGET_US:.0f} us CPU a decision")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=2000)
    main(parser.parse_args().decisions)
