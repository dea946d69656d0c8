"""Egress allowlists on the bwrap rung, for real: the sandbox in a network namespace of its own whose only route is
to the logging proxy (netns.py). A local HTTP server on the host stands for the internet: an allowed host:port works
through the proxy (curl and Python, with the proxy variables the sandbox gets), a host off the list is refused and
logged, a program ignoring the proxy reaches nothing, and the namespaces and veth pair are gone after destroy."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from internet_server import BODY

from evalsi.sandbox.bwrap import BwrapDriver
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.manager import ManagerLimits, SandboxManager
from evalsi.sandbox.model import Endpoint, NetworkPolicy, RootFilesystem, SandboxSpec
from evalsi.sandbox.netns import _new_netns, sweep_stale

# These tests drive the host's curl through the proxy (its report of a 403 is classified as the policy's denial);
# the runtime image, the default root, has no curl, so they opt into the host's /usr (trusted: the test's own code).
HOST = RootFilesystem("host")




@pytest.fixture
def driver(tmp_path: Path) -> BwrapDriver:
    return BwrapDriver(SandboxConfig(cache_dir=tmp_path / "cache"))


def _netns() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout


def _links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout


async def test_allowed_through_the_proxy_denied_off_the_list_and_nothing_around_it(driver: BwrapDriver,
                                                                                  internet: int) -> None:
    session = await driver.create(SandboxSpec(network=NetworkPolicy((Endpoint("127.0.0.1", internet),)), root=HOST))
    egress = session.egress
    assert egress is not None and egress.network is not None
    network = egress.network
    assert network.sandbox_netns in _netns() and network.proxy_netns in _netns()
    try:
        assert "logging proxy" in session.isolation.bounds["network"]
        url = f"http://127.0.0.1:{internet}/allowed"
        by_python = await session.exec(["python3", "-c", f"import urllib.request; "
                                                         f"print(urllib.request.urlopen({url!r}).read().decode())"])
        assert by_python.outcome.kind == "exit" and by_python.outcome.code == 0, by_python
        assert by_python.stdout == BODY + b"\n"
        by_curl = await session.exec(["curl", "-sS", "--max-time", "10", url])
        assert by_curl.outcome.code == 0 and by_curl.stdout == BODY, by_curl
        # A host off the list: the proxy answers 403, and curl's report of it is classified as the policy's denial.
        refused = await session.exec(["curl", "-sS", "--max-time", "10", "https://example.com/"])
        assert (refused.outcome.kind, refused.outcome.effect) == ("denied", "egress denied"), refused
        by_urllib = await session.exec(["python3", "-c", "import urllib.request; "
                                                         "urllib.request.urlopen('http://example.com/')"])
        assert (by_urllib.outcome.kind, by_urllib.outcome.effect) == ("denied", "egress denied"), by_urllib
        # Ignoring the proxy: the host's listener is another namespace's loopback, the internet has no route, and
        # the proxy's side has nothing else listening.
        direct = await session.exec(["python3", "-c", "\n".join((
            "import socket",
            f"for address in [('127.0.0.1', {internet}), ('10.0.0.1', 80), ('169.254.77.1', 22), ('8.8.8.8', 53)]:",
            "    try:",
            "        socket.create_connection(address, timeout=2)",
            "        print('reached', address)",
            "    except OSError as exc:",
            "        print('failed', address, exc.errno)"))], env={"HTTP_PROXY": "", "HTTPS_PROXY": ""})
        assert b"reached" not in direct.stdout and direct.stdout.count(b"failed") == 4, direct
        # The sandbox cannot give itself a route (no capability over the namespace, netlink filtered).
        route = await session.exec(["ip", "route", "add", "default", "via", "169.254.77.1"])
        assert route.outcome.kind != "exit" or route.outcome.code != 0, route
        log = session.egress_log()
        assert [(e.host, e.port, e.allowed) for e in log] == [("127.0.0.1", internet, True)] * 2 + [
            ("example.com", 443, False), ("example.com", 80, False)]
        assert all(e.bytes_received > 0 for e in log[:2]) and "allowlist" in log[2].reason
    finally:
        await session.destroy()
    assert network.sandbox_netns not in _netns() and network.proxy_netns not in _netns()
    assert network.proxy_veth not in _links() and network.sandbox_veth not in _links()
    # Once destroyed, the session cannot run anything (never in the host's network).
    with pytest.raises(Exception, match="network namespace is gone"):
        await session.exec(["true"])


async def test_sandboxd_stats_return_the_egress_log(tmp_path: Path, internet: int) -> None:
    config = SandboxConfig(ladder=("bwrap",), cache_dir=tmp_path / "cache")
    manager = SandboxManager(Ladder(config), tmp_path / "snapshots", ManagerLimits(max_sandboxes=2))
    try:
        spec = SandboxSpec(network=NetworkPolicy((Endpoint("127.0.0.1", internet),)), root=HOST)
        sandbox = await manager.create(spec, project="p")
        result = await manager.exec(sandbox.id, "p", ["curl", "-sS", "--max-time", "10",
                                                      f"http://127.0.0.1:{internet}/"])
        assert result.stdout == BODY, result
        _, stats = manager.stats(sandbox.id, "p")
        assert [(e.host, e.allowed, e.address) for e in stats.egress] == [("127.0.0.1", True, "127.0.0.1")]
    finally:
        await manager.close()


def test_evalsi_sandbox_run_prints_the_egress_log(tmp_path: Path, internet: int) -> None:
    script = f"curl -sS http://127.0.0.1:{internet}/ && curl -sS https://example.com/; true"
    done = subprocess.run([str(Path(sys.executable).parent / "evalsi"), "sandbox", "run", "--ladder", "bwrap",
                           "--root", "host", "--network", f"allow:127.0.0.1:{internet}", "--format", "json", "--",
                           "sh", "-c", script],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["stdout"] == BODY.decode() and "403" in shown["stderr"]
    assert [(e["host"], e["port"], e["allowed"]) for e in shown["egress"]] == [
        ("127.0.0.1", internet, True), ("example.com", 443, False)]
    assert shown["egress"][0]["address"] == "127.0.0.1" and shown["egress"][0]["bytes_received"] > 0


def test_a_veth_address_of_the_host_is_not_the_proxy() -> None:
    """The proxy's side lives in a namespace of its own: a host service bound to every address is not on it."""
    with socket.create_server(("0.0.0.0", 0)) as server:
        assert server.getsockname()[0] == "0.0.0.0"
        assert "169.254.77.1" not in subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout


def test_namespaces_left_by_a_dead_process_are_swept() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer exists (reaped)
    stale = f"evalsi-{dead.pid}-0123abcd-s"
    _new_netns(stale)
    assert stale in _netns()
    assert stale in sweep_stale()
    assert stale not in _netns()
