"""The code pack with spec.sandbox allowing egress (bubblewrap, embedded `evalsi run`): the candidate reaches the
allowed host through the logging proxy, a host off the list is refused, and the proxy's log is in the score's
metadata (``egress``) beside the isolation report: evidence a safety evaluator can read."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from sandboxd_process import require_bwrap

from evalsi.cli.main import cli

BODY = "hello from the internet"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        data = BODY.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def internet() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_unit_tests_behind_the_egress_proxy_carry_its_log(tmp_path: Path, internet: int) -> None:
    require_bwrap()
    program = ("```python\nimport urllib.request\n\n\ndef fetch(url):\n"
               "    return urllib.request.urlopen(url, timeout=5).read().decode()\n```")
    tests = (f"def test_allowed():\n    assert fetch('http://127.0.0.1:{internet}/') == {BODY!r}\n\n\n"
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
