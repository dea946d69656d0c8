"""How fast the CLI and the package start, and which heavy modules they load.

    python benchmarks/startup.py [--runs 15]

Target: `evalsi --help` in <= 0.3 s. Each command runs --runs times in a fresh process; the median wall time
is printed beside the CPU time (user + system) the process used, which a busy machine inflates far less than
wall time, and beside `python -c pass` (the interpreter's and site's own start, editable install included).
Bytecode is cached in a scratch PYTHONPYCACHEPREFIX even where PYTHONDONTWRITEBYTECODE is set, as an installed
package would have it: otherwise every start recompiles the sources. The last column lists the heavy modules
each command imported: it should say "none".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.3
HEAVY = ("scipy", "numpy", "grpc", "pyarrow", "httpx", "aiohttp", "opentelemetry", "datasets", "pandas")

# Prints the heavy top-level packages loaded by the time the process exits (click exits through SystemExit).
_PROBE = """
import atexit, json, sys
heavy = {heavy!r}
atexit.register(lambda: print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set(heavy))),
                              file=open({out!r}, 'w')))
sys.argv = {argv!r}
{body}
"""


def evalsi_bin() -> str:
    beside = Path(sys.executable).parent / "evalsi"
    return str(beside) if beside.exists() else shutil.which("evalsi") or "evalsi"


def commands() -> dict[str, tuple[list[str], str, list[str]]]:
    """Label -> (command line timed, probe body, argv for the probe)."""
    cli = "from evalsi.cli.main import main\nmain()"
    return {
        "python -c pass (reference)": ([sys.executable, "-c", "pass"], "pass", ["-c"]),
        "python -c 'import evalsi'": ([sys.executable, "-c", "import evalsi"], "import evalsi", ["-c"]),
        "evalsi --help": ([evalsi_bin(), "--help"], cli, ["evalsi", "--help"]),
        "evalsi eval --help": ([evalsi_bin(), "eval", "--help"], cli, ["evalsi", "eval", "--help"]),
    }


def time_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(body: str, argv: list[str], scratch: Path) -> list[str]:
    out = scratch / "modules.json"
    probe = _PROBE.format(heavy=HEAVY, out=str(out), argv=argv, body=body)
    subprocess.run([sys.executable, "-c", probe], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"evalsi-startup-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    print(f"{args.runs} runs each, median; target {TARGET_S:.1f} s for evalsi --help; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'command':<30} {'wall s':>8} {'cpu s':>7}  heavy modules imported")
    for label, (argv, body, probe_argv) in commands().items():
        # Warm the OS's file cache and write the bytecode.
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
        runs = [time_once(argv, env) for _ in range(args.runs)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        heavy = heavy_imports(body, probe_argv, scratch)
        print(f"{label:<30} {wall:>8.3f} {cpu:>7.3f}  {', '.join(heavy) or 'none'}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
