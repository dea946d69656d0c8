"""Setup once and restore, against setup per trial: k trials of one harness environment whose setup takes ~1 s.

    .venv/bin/python benchmarks/environment_snapshots.py                 # k=4, 3 rounds, the bwrap rung
    .venv/bin/python benchmarks/environment_snapshots.py --trials 8 --setup-s 2 --rounds 5

Each round prepares the environment k times one after another (as a task's trials reach a worker), once with
``snapshot: false`` (the setup runs in every trial) and once shared (``SharedSetups``: the first trial runs the
setup and snapshots the workspace, the others restore it), alternating which goes first so both see the same
minutes of this shared machine. Each trial also runs one command, so a restored sandbox is shown to work. Target:
shared ≈ one setup plus k restores (each a few milliseconds on bwrap), against k setups. CPU seconds (this process
and its children) and the load average are printed beside wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from evalsi.harness.environment import environment_from_mapping
from evalsi.harness.environment_run import prepared
from evalsi.harness.environment_snapshots import SharedSetups
from evalsi.sandbox.access import LadderOpener, SandboxOpener
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.ladder import Ladder


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def _trials(opener: SandboxOpener, doc: dict, k: int, run_id: str) -> tuple[float, float]:
    environment = environment_from_mapping(doc, "benchmark")
    wall, cpu = time.perf_counter(), _cpu_s()
    for _ in range(k):
        async with prepared(environment, opener, "bench", run_id=run_id) as session:
            result = await session.exec(["sh", "-c", "cat stamp >/dev/null && ls deps | wc -l"])
            assert result.outcome.kind == "exit" and result.outcome.code == 0, result
    return time.perf_counter() - wall, _cpu_s() - cpu


async def main(trials: int, setup_s: float, rounds: int, cache: Path) -> None:
    ladder = Ladder(SandboxConfig(ladder=("bwrap",), cache_dir=cache))
    # A setup that waits (a download, a build) and leaves files behind: 200 small ones and a stamp.
    doc = {"files": {"requirements.txt": "example==1.0\n"},
           "setup": [f"sleep {setup_s:g}; mkdir deps; for i in $(seq 200); do echo $i > deps/$i.py; done; "
                     "date > stamp"]}
    warm = LadderOpener(ladder)
    await _trials(warm, {**doc, "setup": ["mkdir deps; date > stamp"]}, 1, "warm-up")  # the probe, the image
    figures: dict[str, list[tuple[float, float]]] = {"per-trial": [], "shared": []}
    for round_ in range(rounds):
        order = ["per-trial", "shared"] if round_ % 2 == 0 else ["shared", "per-trial"]
        for mode in order:
            if mode == "shared":
                opener: SandboxOpener = SharedSetups(LadderOpener(ladder))
                figures[mode].append(await _trials(opener, doc, trials, f"round-{round_}"))
            else:
                figures[mode].append(await _trials(LadderOpener(ladder), {**doc, "snapshot": False}, trials,
                                                   f"round-{round_}"))
    load = os.getloadavg()
    print(f"k={trials} trials of an environment whose setup sleeps {setup_s:g} s (bwrap, {rounds} rounds, "
          f"alternating; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs)")
    for mode, runs in figures.items():
        walls = [w for w, _ in runs]
        cpus = [c for _, c in runs]
        print(f"  {mode:<9} wall median {statistics.median(walls):6.2f} s (min {min(walls):.2f}, max "
              f"{max(walls):.2f}); CPU median {statistics.median(cpus):.2f} s")
    per_trial = statistics.median(w for w, _ in figures["per-trial"])
    shared = statistics.median(w for w, _ in figures["shared"])
    ideal = setup_s + 0.0  # one setup; restores and the rest are the overhead over it
    print(f"  shared/per-trial = {shared / per_trial:.2f} (target: about 1/{trials} of the setup time, i.e. "
          f"shared ≈ {ideal:g} s + k restores; per-trial ≈ {trials} × {setup_s:g} s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--setup-s", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalsi-bench-") as directory:
        os.chmod(directory, 0o711)  # the runtime image in it must be reachable by the sandbox's host user
        asyncio.run(main(args.trials, args.setup_s, args.rounds, Path(directory) / "cache"))
