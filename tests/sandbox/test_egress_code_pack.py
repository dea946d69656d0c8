"""The code pack with spec.sandbox allowing egress (bubblewrap, embedded `evalsi run`): the candidate reaches the
allowed host through the logging proxy, a host off the list is refused, and the proxy's log is in the score's
metadata (``egress``) beside the isolation report: evidence a safety evaluator can read."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner
from internet_server import BODY
from sandboxd_process import require_bwrap

from evalsi.cli.main import cli


def test_unit_tests_behind_the_egress_proxy_carry_its_log(tmp_path: Path, internet: int) -> None:
    require_bwrap()
    program = ("```python\nimport urllib.request\n\n\ndef fetch(url):\n"
               "    return urllib.request.urlopen(url, timeout=5).read().decode()\n```")
    tests = (f"def test_allowed():\n    assert fetch('http://127.0.0.1:{internet}/') == {BODY.decode()!r}\n\n\n"
             "def test_off_the_list():\n    try:\n        fetch('http://example.com/')\n    except Exception as exc:\n"
             "        assert '403' in str(exc)\n    else:\n        raise AssertionError('reached example.com')\n")
    (tmp_path / "data.jsonl").write_text(json.dumps({"id": "fetcher", "output": program, "reference": tests}) + "\n")
    spec = {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "egress"},
            "spec": {"target": {"outputs": {}}, "dataset": {"path": "data.jsonl"},
                     "sandbox": {"minIsolation": "namespaced", "network": "allow",
                                 "allow": [f"127.0.0.1:{internet}"]},
                     "evaluators": [{"ref": "builtin/unit-tests", "params": {"timeout_s": 10}}]}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "run.json"
    done = CliRunner().invoke(cli, ["run", "-f", str(tmp_path / "run.yaml"), "--output", str(out)])
    assert done.exit_code == 0, done.output
    [result] = json.loads(out.read_text())["results"]
    score = next(s for s in result["scores"] if s.get("name", "passed") == "passed")
    assert score["passed"] is True, score
    assert "logging proxy" in score["metadata"]["isolation"]["bounds"]["network"]
    egress = score["metadata"]["egress"]
    assert [(e["host"], e["port"], e["allowed"]) for e in egress] == [("127.0.0.1", internet, True),
                                                                     ("example.com", 80, False)]
    assert egress[0]["address"] == "127.0.0.1" and "allowlist" in egress[1]["reason"]
