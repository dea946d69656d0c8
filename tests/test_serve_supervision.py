"""`evalsi serve` as a user runs it: ports checked before anything starts, no child outliving it (even when it is
killed with SIGKILL during start-up), a crash loop given up on with the child's last log lines, one "ready" line,
and the Postgres password never on a command line or the console."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from evalsi.service.config import ApiConfig, Config
from evalsi.service.supervisor import Child, CrashLoop, Supervisor
from evalsi.testing.services import PostgresServer
from evalsi.testing.stack import distinct_free_ports

EVALSI = str(Path(sys.executable).parent / "evalsi")
PASSWORD = "pw-6f1e0c-never-shown"
NUL = b"\0"


def _config(tmp_path: Path, **extra: object) -> Path:
    """An evalsi.yaml on free ports with one worker (fewer processes: a faster start on a small machine)."""
    http, grpc, otlp_http, otlp_grpc = distinct_free_ports(4)
    document = {
        "metadata": {"url": f"sqlite:///{tmp_path / 'evalsi.db'}"},
        "objects": {"url": str(tmp_path / "objects")},
        "api": {"http_port": http, "grpc_port": grpc},
        "ingest": {"http_port": otlp_http, "grpc_port": otlp_grpc},
        "workers": [{"pool": "cpu", "replicas": 1, "concurrency": 2}],
        **extra,
    }
    path = tmp_path / "evalsi.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _serve(tmp_path: Path, config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [EVALSI, "serve", "--config", str(config), "--state-dir", str(tmp_path / "state")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def _children_of(pid: int) -> dict[int, int]:
    """Live children of ``pid``: pid → process group."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry.name)] = int(fields[2])
    return found


def _live_in_groups(groups: set[int]) -> list[int]:
    """Live (not zombie: PID 1 may be slow to reap orphans) processes in these process groups."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split() if entry.name.isdigit() else []
        except OSError:
            continue
        if fields and int(fields[2]) in groups and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _processes_mentioning(text: str) -> list[str]:
    """Live processes whose command line or environment contains ``text`` (a state directory)."""
    hits = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (text.encode() in cmdline or text.encode() in environ):
            hits.append(f"{entry.name}: {cmdline.replace(NUL, b' ').decode(errors='replace')[:160]}")
    return hits


def _connections_to(dsn: str, database: str) -> int:
    """Client connections to ``database`` other than this query's own."""
    import asyncpg

    async def count() -> int:
        connection = await asyncpg.connect(dsn)
        try:
            query = "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"
            return int(await connection.fetchval(query, database))
        finally:
            await connection.close()

    return asyncio.run(count())


def _wait_gone(pids: set[int], timeout_s: float) -> set[int]:
    deadline = time.monotonic() + timeout_s
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if Path(f"/proc/{p}").exists() and _state(p) != "Z"}
        time.sleep(0.05)
    return alive


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder


def test_a_taken_port_is_exit_2_naming_it_and_nothing_starts(tmp_path: Path, listening: socket.socket) -> None:
    port = listening.getsockname()[1]
    config = _config(tmp_path)
    document = yaml.safe_load(config.read_text())
    document["ingest"]["grpc_port"] = port
    config.write_text(yaml.safe_dump(document))
    done = subprocess.run(
        [EVALSI, "serve", "--config", str(config), "--state-dir", str(tmp_path / "state")],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"port {port} on 127.0.0.1, OTLP/gRPC of evalsi-ingest (ingest.grpc_port), wanted by ingest" in done.stderr
    assert "already in use" in done.stderr and "Nothing was started" in done.stderr
    # Nothing ran: no logs, no nats store, no process.
    assert not (tmp_path / "state" / "logs").exists() and not (tmp_path / "state" / "nats").exists()
    assert _processes_mentioning(str(tmp_path)) == []


def test_serve_killed_during_start_up_leaves_no_process_behind(tmp_path: Path) -> None:
    serve = _serve(tmp_path, _config(tmp_path))
    try:
        # nats-server and the first services are up (not yet ready: the api answers /readyz seconds later).
        # The services lead their own process groups; a child caught between fork and setsid is still in serve's,
        # so the snapshot is retaken until three lead theirs.
        deadline = time.monotonic() + 30
        children: dict[int, int] = {}
        groups: set[int] = set()
        while (len(children) < 4 or len(groups) < 3) and time.monotonic() < deadline:
            children = _children_of(serve.pid)
            groups = {group for pid, group in children.items() if group == pid}
            time.sleep(0.02)
        assert len(children) >= 4, serve.communicate()[0] if serve.poll() is not None else children
        assert len(groups) >= 3, children
        serve.send_signal(signal.SIGKILL)
        serve.wait(timeout=10)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        assert serve.stdout is not None
        output = serve.stdout.read()
    left = _wait_gone(set(children), timeout_s=10)
    assert left == set(), f"children alive after serve was killed: {left}\n{output}"
    assert "ready in" not in output  # it was killed during start-up
    assert _live_in_groups(groups) == []  # nothing the children started either
    # Nor a child started after the snapshot: every one has the test's directory in its environment (store URLs).
    assert _processes_mentioning(str(tmp_path)) == []


def test_a_child_that_always_crashes_ends_serve_with_its_last_log_lines(tmp_path: Path) -> None:
    crash = "import sys; print('starting', flush=True); print('fatal: cannot open the store', flush=True); sys.exit(3)"

    def plan(config: Config, nats_url: str, state_dir: Path) -> list[Child]:
        logs = state_dir / "logs"
        return [
            Child("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"], dict(os.environ),
                  logs / "sleeper.log"),
            Child("crasher", [sys.executable, "-c", crash], dict(os.environ), logs / "crasher.log"),
        ]

    http, grpc = distinct_free_ports(2)
    console: list[str] = []
    supervisor = Supervisor(
        Config(nats_url="nats://127.0.0.1:1", api=ApiConfig(http_port=http, grpc_port=grpc)), tmp_path / "state",
        echo=console.append, plan=plan, max_restarts=3, restart_window_s=60, restart_backoff_s=(0.05,),
    )
    started = time.monotonic()
    with pytest.raises(CrashLoop) as raised:
        supervisor.run()
    assert time.monotonic() - started < 30
    message = str(raised.value)
    assert message.startswith(
        "crasher exited 4 times in a row, each within 60 s of starting (last exit code 3); giving up."
    )
    assert message.rstrip().endswith("starting\nfatal: cannot open the store")
    assert supervisor.child("crasher").restarts == 3
    assert [line for line in console if line.startswith("crasher exited with 3")] == [
        line for line in console if "restarting in 0.05 s" in line
    ]
    assert len([line for line in console if "restarting in" in line]) == 3
    # Giving up stopped everything else too.
    assert supervisor.child("sleeper").exited() is not None
    assert console[-2:] == ["stopping: services drain, then nats stops", "stopped"]


def test_a_child_that_runs_past_the_window_before_exiting_is_always_restarted(tmp_path: Path) -> None:
    """Only exits of short runs count toward giving up: one that ran past the window starts the count anew."""

    def plan(config: Config, nats_url: str, state_dir: Path) -> list[Child]:
        argv = [sys.executable, "-c", "import time; time.sleep(0.6)"]
        return [Child("slow-exit", argv, dict(os.environ), state_dir / "logs" / "slow-exit.log")]

    http, grpc = distinct_free_ports(2)
    supervisor = Supervisor(
        Config(nats_url="nats://127.0.0.1:1", api=ApiConfig(http_port=http, grpc_port=grpc)), tmp_path / "state",
        echo=lambda line: None, plan=plan, max_restarts=1, restart_window_s=0.3, restart_backoff_s=(0.05,),
    )
    supervisor.start()
    try:
        deadline = time.monotonic() + 60
        while supervisor.child("slow-exit").restarts < 3 and time.monotonic() < deadline:
            supervisor.supervise_once()  # raises CrashLoop if the count were not reset
            time.sleep(0.05)
    finally:
        supervisor.stop(grace_s=1)
    assert supervisor.child("slow-exit").restarts >= 3 and supervisor.child("slow-exit").crashes == 1


def test_what_a_child_started_is_stopped_with_it(tmp_path: Path) -> None:
    """A service's own children (an MCP server, a forked process) go when it goes: its process group is killed."""
    spawn = ("import subprocess, sys, time; "
             "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
             "print(p.pid, flush=True); time.sleep(120)")

    def plan(config: Config, nats_url: str, state_dir: Path) -> list[Child]:
        return [Child(f"parent-{i}", [sys.executable, "-c", spawn], dict(os.environ),
                      state_dir / "logs" / f"parent-{i}.log") for i in range(2)]

    http, grpc = distinct_free_ports(2)
    supervisor = Supervisor(
        Config(nats_url="nats://127.0.0.1:1", api=ApiConfig(http_port=http, grpc_port=grpc)), tmp_path / "state",
        echo=lambda line: None, plan=plan, restart=False,
    )
    supervisor.start()
    try:
        grandchildren = []
        for child in supervisor.children:
            deadline = time.monotonic() + 30
            while not child.log_path.read_text().strip() and time.monotonic() < deadline:
                time.sleep(0.05)
            grandchildren.append(int(child.log_path.read_text().split()[0]))
        # One parent dies on its own: the supervisor notices, and its child goes with it.
        assert supervisor.children[0].process is not None
        os.kill(supervisor.children[0].process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while supervisor.children[0].exited() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _wait_gone({grandchildren[0]}, timeout_s=5) == set()
        assert _state(grandchildren[1]) not in ("gone", "Z")
    finally:
        supervisor.stop(grace_s=2)  # the other is stopped: its child goes too
    assert _wait_gone(set(grandchildren), timeout_s=5) == set()


def test_serve_on_postgres_keeps_the_password_off_command_lines_and_console_and_says_ready_once(
    tmp_path: Path,
) -> None:
    with PostgresServer() as postgres:
        url = f"postgresql://postgres:{PASSWORD}@{postgres.host}:{postgres.port}/{postgres.database}"
        serve = _serve(tmp_path, _config(tmp_path, metadata={"url": url}))
        assert serve.stdout is not None
        lines: list[str] = []
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not any(line.startswith("ready in") for line in lines):
                line = serve.stdout.readline()
                if not line:
                    break
                lines.append(line.rstrip("\n"))
            assert any(line.startswith("ready in") for line in lines), "\n".join(lines)
            children = _children_of(serve.pid)
            assert len(children) == 7  # nats-server, api, ingest, policy, sandboxd, scheduler-0, worker-cpu-0
            for pid in children:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                assert PASSWORD.encode() not in cmdline, cmdline
            # The services got it (their environment, in the supervisor's forks: no file or argv holds it), and
            # the metadata store's users (api, policy, scheduler) are connected with it.
            assert _connections_to(postgres.dsn, postgres.database) >= 3
        finally:
            serve.send_signal(signal.SIGTERM)
            rest, _ = serve.communicate(timeout=60)
        lines += rest.splitlines()
        assert serve.returncode == 0, "\n".join(lines)
    console = "\n".join(lines)
    assert PASSWORD not in console
    assert f"state      postgresql://postgres:***@{postgres.host}:{postgres.port}/{postgres.database}" in console
    ready = [line for line in lines if line.startswith("ready in")]
    assert len(ready) == 1
    http = yaml.safe_load((tmp_path / "evalsi.yaml").read_text())["api"]["http_port"]
    assert f"http://127.0.0.1:{http} (HTTP/JSON)" in ready[0]
    for log in (tmp_path / "state" / "logs").iterdir():
        assert PASSWORD not in log.read_text(errors="replace"), log.name
    assert lines[-2:] == ["stopping: services drain, then nats stops", "stopped"]
    assert _wait_gone(set(children), timeout_s=5) == set()


def test_a_launched_command_keeps_its_pid_and_command_line_and_dies_with_its_parent() -> None:
    script = (
        "import subprocess, time\n"
        "from evalsi.child_processes import with_death_signal\n"
        "child = subprocess.Popen(with_death_signal(['sleep', '120']))\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        cmdline = Path(f"/proc/{pid}/cmdline")
        deadline = time.monotonic() + 20
        while cmdline.read_bytes() != b"sleep\x00120\x00":  # the launcher execs the command in place
            assert time.monotonic() < deadline, cmdline.read_bytes()
            time.sleep(0.02)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child outlived its SIGKILLed parent"
        time.sleep(0.05)
