"""The parts `evalsi serve` forks its services with (evalsi.service.forked): which imports it preloads, and what a
forked service gets instead of what it inherits."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalsi.service.forked import service_imports


def _package(root: Path, name: str, files: dict[str, str]) -> None:
    package = root / name
    package.mkdir()
    for file, text in files.items():
        (package / file).write_text(textwrap.dedent(text))


def test_service_imports_are_the_module_level_imports_of_the_package_but_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path, "evalsi_probe", {
        "__init__.py": "",
        "main.py": """
            from __future__ import annotations
            import os, email.mime
            from json import dumps
            from evalsi_probe import helpers
            from . import helpers as again

            def main(argv):
                import csv  # deferred on purpose: not preloaded
                return 0
        """,
        "helpers.py": "from collections import OrderedDict\nif True:\n    import zipfile\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    assert service_imports("evalsi_probe.main") == (
        "collections", "collections.OrderedDict", "email.mime", "json", "json.dumps", "os",
    )


def test_a_service_package_that_does_not_exist_has_no_imports() -> None:
    assert service_imports("evalsi_no_such_service.main") == ()


def test_the_real_services_preload_the_kit_and_not_each_other() -> None:
    for module in ("evalsi_api.main", "evalsi_worker.main", "evalsi_scheduler.main"):
        names = service_imports(module)
        assert "evalsi.service.kit" in names
        assert not [name for name in names if name.startswith("evalsi_")], names


# Run in a fresh interpreter: a fork needs a single-threaded parent, which a test process need not be.
_FORK = """
import json, os, signal, sys, time
from pathlib import Path
from evalsi.service.forked import fork_service, preload
os.environ["PARENT_ONLY"] = "1"
signal.signal(signal.SIGTERM, lambda *_: None)  # the supervisor's own handler; the fork must not keep it
print(json.dumps({"preloaded": preload(["wave", "wave.open", "no_such_module_here"]), "pid": os.getpid(),
                  "wave": "wave" in sys.modules}))
log = Path(sys.argv[1]) / "probe.log"
child = fork_service("probe-service", [sys.executable, "-m", "evalsi_probe.main", "--flag", "x"],
                     {"ONLY_CHILD": "yes", "PATH": os.environ["PATH"]}, log)
print(json.dumps({"code": child.wait(), "child": child.pid}), flush=True)
term = fork_service("probe-service", [sys.executable, "-m", "evalsi_probe.sleep"], {}, log)
time.sleep(1.0)
os.kill(term.pid, signal.SIGTERM)
print(json.dumps({"terminated": term.wait()}), flush=True)
"""


def test_a_forked_service_runs_main_with_its_own_environment_argv_group_log_and_signals(tmp_path: Path) -> None:
    _package(tmp_path, "evalsi_probe", {
        "__init__.py": "",
        "main.py": """
            import json, os, signal, sys
            def main(argv):
                print(json.dumps({"argv": argv, "sys.argv": sys.argv, "env": dict(os.environ), "pid": os.getpid(),
                                  "pgid": os.getpgid(0), "comm": open("/proc/self/comm").read().strip(),
                                  "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
                                  "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))}))
                print("to stderr", file=sys.stderr)
                return 3
        """,
        "sleep.py": "import time\ndef main(argv):\n    time.sleep(60)\n",
    })
    done = subprocess.run([sys.executable, "-c", _FORK, str(tmp_path)], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    parent, ran, terminated = (json.loads(line) for line in done.stdout.splitlines())
    assert parent["preloaded"] == 1 and parent["wave"]  # wave.open is a name, not a module; a missing one skipped
    assert ran["code"] == 3
    lines = (tmp_path / "probe.log").read_text().splitlines()
    seen = json.loads(lines[0])
    assert lines[1] == "to stderr"
    assert seen["argv"] == ["--flag", "x"] and seen["sys.argv"] == ["evalsi_probe.main", "--flag", "x"]
    assert seen["env"] == {"ONLY_CHILD": "yes", "PATH": "/usr/bin:/bin"}  # the parent's PARENT_ONLY is gone
    assert seen["pid"] == ran["child"] != parent["pid"]
    assert seen["pgid"] == seen["pid"]  # its own process group
    assert seen["comm"] == "probe-service"
    assert seen["sigterm_default"]
    assert seen["blocked"] == []  # the stop signals held across the fork are delivered again
    assert terminated["terminated"] == -15  # SIGTERM ended it: the parent's ignoring handler was not inherited
    # Nothing of the child ran the parent's code after the fork: its output came once, from the parent.
    assert len(done.stdout.splitlines()) == 3
