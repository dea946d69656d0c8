"""Every shell and Python block in README.md and docs/ runs as written (see doc_blocks.py for how), or says why not.

A snippet that breaks fails here, naming its file and line, with its output."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from doc_blocks import (
    DOC_PORTS,
    ROOT,
    Addresses,
    Block,
    all_blocks,
    blocks_of,
    expect_errors,
    parse_directive,
    rewrite,
    rewrite_addresses,
    with_sessions,
)

from evalsi.ports import free_ports

BLOCKS = all_blocks()
RUN = [block for block in BLOCKS if block.directive.skip is None]
BLOCK_TIMEOUT_S = 240
BIN_DIR = str(Path(sys.executable).parent)


def _environment(home: Path, plugin_venvs: Path | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("EVALSI_")}
    env.update(PATH=f"{BIN_DIR}{os.pathsep}{env.get('PATH', '')}", HOME=str(home),
               XDG_CONFIG_HOME=str(home / ".config"), OPENAI_API_KEY="sk-doc-test",
               ANTHROPIC_API_KEY="sk-ant-doc-test", PYTHONUNBUFFERED="1")
    if plugin_venvs is not None:
        # One plugin venv cache for every block: a plugin's venv is keyed by its manifest's and package's digest, so
        # blocks running the same plugin (or adapter) build it once, not once per block's fresh HOME.
        env["EVALSI_PLUGINS_CACHE"] = str(plugin_venvs)
    return env


@pytest.fixture(scope="session")
def plugin_venvs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plugin-venvs")


def _wait_ready_line(log: Path, deadline_s: float, process: subprocess.Popen[bytes]) -> None:
    """Until `evalsi serve` prints its "ready in" line (every service answers /readyz)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if process.poll() is not None:
            raise AssertionError(f"evalsi serve exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        if any(line.startswith("ready in") for line in log.read_text(errors="replace").splitlines()):
            return
        time.sleep(0.2)
    raise AssertionError(f"evalsi serve was not ready within {deadline_s:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, int]]:
    """One `evalsi serve` on free ports, shared by every block that needs a server."""
    base = tmp_path_factory.mktemp("serve")
    shutil.copy(ROOT / "examples" / "quickstart" / "qa.jsonl", base / "qa.jsonl")  # api.md's runs read qa.jsonl
    http, grpc, otlp_http, otlp_grpc = free_ports(4)
    log = base / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [f"{BIN_DIR}/evalsi", "serve", "--state-dir", str(base / "state"), "--datasets-dir", str(base),
             "--http-port", str(http), "--grpc-port", str(grpc),
             "--otlp-http-port", str(otlp_http), "--otlp-grpc-port", str(otlp_grpc)],
            cwd=base, env=_environment(base), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_ready_line(log, 120, process)  # every service answers /readyz, as a reader waits for it
        yield {8080: http, 8081: grpc, 4318: otlp_http, 4317: otlp_grpc}
    finally:
        _stop(process)


@contextlib.contextmanager
def _listening(base: Path, command: Callable[[int], list[str]]) -> Iterator[int]:
    """A server the test starts on a free port (``command`` given the port), until it answers there."""
    (port,) = free_ports(1)
    log = base / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command(port), env=_environment(base), stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        _wait_tcp(port, 30, process, log)
        yield port
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A local OpenAI-compatible server answering every model and judge call (doc_model.py says how)."""
    with _listening(tmp_path_factory.mktemp("model"),
                    lambda port: [sys.executable, str(Path(__file__).with_name("doc_model.py")), str(port)]) as port:
        yield port


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The scripted agent of examples/cases/agent.yaml, speaking docs/agent-protocol.md."""
    script = str(ROOT / "examples/cases/agent.yaml")
    with _listening(tmp_path_factory.mktemp("agent"),
                    lambda port: [sys.executable, "-m", "evalsi.cases.testing", "--script", script,
                                  "--port", str(port)]) as port:
        yield port


def _wait_tcp(port: int, deadline_s: float, process: subprocess.Popen[bytes], log: Path) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if process.poll() is not None:
            raise AssertionError(f"port {port}: the server exited ({process.returncode}):\n{log.read_text()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"port {port} did not answer within {deadline_s:.0f} s:\n{log.read_text()}")


def _prepare(block: Block, workdir: Path, addresses: Addresses) -> None:
    shutil.copytree(ROOT / "examples", workdir / "examples")
    for spec in (workdir / "examples").rglob("*.yaml"):  # the specs name the docs' addresses too
        spec.write_text(rewrite_addresses(spec.read_text(encoding="utf-8"), addresses), encoding="utf-8")
    for dest, source in block.directive.files:
        target = workdir / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, target)
        else:
            shutil.copy(ROOT / source, target)


@pytest.mark.parametrize("block", RUN, ids=[block.where for block in RUN])
def test_block_runs_as_written(block: Block, request: pytest.FixtureRequest, tmp_path: Path,
                               plugin_venvs: Path) -> None:
    ports = dict(zip(DOC_PORTS, free_ports(len(DOC_PORTS)), strict=True))
    serving = "serve" in block.directive.needs
    if serving:
        ports.update(request.getfixturevalue("served"))
    if "agent" in block.directive.needs:
        ports[8765] = request.getfixturevalue("agent")
    model_port = request.getfixturevalue("model") if "model" in block.directive.needs else 0
    workdir = tmp_path / "work"
    workdir.mkdir()
    addresses = Addresses(ports, serving, model_port, own_serve="own-serve" in block.directive.needs)
    _prepare(block, workdir, addresses)
    code = rewrite(block.code, block.language, addresses, BIN_DIR)
    if block.language == "bash":
        script = workdir / "block.sh"
        script.write_text("set -euo pipefail\n" + code, encoding="utf-8")
        command = ["bash", str(script)]
    else:
        script = workdir / "block.py"
        script.write_text(code, encoding="utf-8")
        command = [sys.executable, str(script)]
    # Output goes to a file, not a pipe: a server the block left in the background would hold a pipe open.
    log = workdir / "block.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=workdir, env=_environment(tmp_path, plugin_venvs), stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        process.wait(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where} ran past {BLOCK_TIMEOUT_S} s:\n{code}\n--- output ---\n{_tail(log)}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # what it left in the background (an agent, a provider)
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode == 0, (
        f"{block.where} failed (exit {process.returncode}):\n{code}\n--- output ---\n{_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-4000:]


def test_every_skipped_block_says_why() -> None:
    skipped = [block for block in BLOCKS if block.directive.skip is not None]
    assert all(len(block.directive.skip or "") >= 10 for block in skipped), [b.where for b in skipped]
    # Most blocks run: a skip is for what cannot run here (a paid API, docker, a fragment), not a shortcut.
    assert len(RUN) >= 2 * len(skipped), f"{len(RUN)} blocks run, {len(skipped)} skipped"


def test_the_parser_reads_directives_and_refuses_bad_ones(tmp_path: Path) -> None:
    assert parse_directive("skip: needs a paid API key", "x.md:1").skip == "needs a paid API key"
    directive = parse_directive("needs=serve,model files=qa.jsonl:examples/quickstart/qa.jsonl", "x.md:1")
    assert directive.needs == {"serve", "model"} and directive.files == (("qa.jsonl", "examples/quickstart/qa.jsonl"),)
    with pytest.raises(ValueError, match=r"x\.md:3: doc-test skip needs a reason"):
        parse_directive("skip", "x.md:3")
    with pytest.raises(ValueError, match=r"doc-test needs \['gpu'\]"):
        parse_directive("needs=gpu", "x.md:1")
    with pytest.raises(ValueError, match="unknown doc-test key 'need'"):
        parse_directive("need=serve", "x.md:1")
    doc = tmp_path / "docs" / "x.md"
    doc.parent.mkdir()
    doc.write_text("```python\nimport json\n```\n<!-- doc-test: needs=continues -->\n```python\nprint(json)\n```\n"
                   "<!-- doc-test: skip: shows a config file -->\n```sh\nexit 1\n```\n")
    first, second, third = with_sessions(blocks_of(doc, root=tmp_path))
    assert (first.where, first.language) == ("docs/x.md:1", "python")
    assert second.code == "import json\nprint(json)\n" and third.directive.skip == "shows a config file"


def test_rewrite_points_the_docs_addresses_at_the_test_servers() -> None:
    addresses = Addresses({8080: 50001, 8081: 50002, 4318: 50003, 4317: 50004, 8765: 50005, 8766: 50006},
                          serving=True, model=50007)
    code = ("evalsi runs list --server URL\nevalsi policies get p --server ... > p.yaml\n"
            "curl -s localhost:8080/v1alpha1/runs\npython -m x --port 8765 &\n"
            "evalsi eval --judge-base-url https://api.openai.com/v1\nevalsi serve --config evalsi.yaml\n"
            "evalsi runs get r --server URL   # error: not found\n")
    out = rewrite(code, "bash", addresses, "/venv/bin")
    assert "--server http://127.0.0.1:50001\n" in out and "--server http://127.0.0.1:50001 > p.yaml" in out
    assert "localhost:50001/v1alpha1/runs" in out and "--port 50005 &" in out
    assert "/dev/tcp/127.0.0.1/50005" in out and "http://127.0.0.1:50007/v1" in out
    assert "\nevalsi serve" not in out and "if evalsi runs get r --server http://127.0.0.1:50001; then" in out
    assert expect_errors("true  # error: x\n").startswith("if true; then")


def test_a_block_with_its_own_serve_runs_it_on_the_rewritten_ports() -> None:
    addresses = Addresses({8080: 50001, 8081: 50002, 9400: 50008}, own_serve=True)
    code = ("python examples/auth/local_issuer.py --port 9400 &\n"
            "evalsi serve --config evalsi.yaml --http-port 8080 --grpc-port 8081 > serve.log 2>&1 &\n")
    out = rewrite(code, "bash", addresses, "/venv/bin")
    assert "--port 50008 &" in out and "/dev/tcp/127.0.0.1/50008" in out
    assert "\nevalsi serve --config evalsi.yaml --http-port 50001 --grpc-port 50002 > serve.log 2>&1 &" in out
