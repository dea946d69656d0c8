"""Harbor's verifier and its oracle agent, run INSIDE the sandbox (standard library only) as ``.harbor/check.py``.

Harbor uploads a task's ``tests/`` to ``/tests``, runs ``bash /tests/test.sh`` in the container's working directory
and reads the reward the script wrote under ``/logs/verifier``. The sandbox's root is read-only (only the workspace
is written), so the tests are in ``.harbor/tests`` and the verifier's directory is ``.harbor/logs/verifier``: before
running, every absolute ``/tests``, ``/logs`` and ``/solution`` in the copied scripts' text is made to name those
workspace directories (a path standing alone, as ``/tests/test.sh``; ``/app/tests`` or ``$HOME/tests`` are left
alone). ``bash`` runs the script where the root has it, busybox's ``sh`` otherwise (the runtime image has no bash).

``verify SECONDS``: runs test.sh (its output into ``test-stdout.txt`` beside the reward, as Harbor keeps it) and
prints one JSON line ``{"success", "reason", "score"}`` read from the reward files as Harbor's verifier reads them:
``reward.txt`` (one number) first, else ``reward.json`` (an object of numbers, its ``reward`` key or its one key);
neither, an empty one or one that does not parse fails with Harbor's error's name. The reward is the score; the
task passes when it is 1. ``solve``: Harbor's oracle agent, ``solution/solve.sh`` run the same way.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys

STATE = ".harbor"
_ABSOLUTE = re.compile(r"(?<![\w.~$/-])/(tests|logs|solution)(?![\w.-])")
_TAIL = 400
_MAX_REWARD_BYTES = 1 << 20


def mapped(text, home):
    """``text`` with each standalone absolute ``/tests``, ``/logs`` or ``/solution`` under ``home`` instead."""
    return _ABSOLUTE.sub(lambda match: f"{home}/{match.group(1)}", text)


def _map_tree(folder, home):
    for parent, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(parent, name)
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
            except (UnicodeDecodeError, OSError):
                continue
            changed = mapped(text, home)
            if changed != text:
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(changed)


def _shell():
    return shutil.which("bash") or "sh"


def _failed(reason):
    return {"success": False, "reason": reason}


def _reward_file(path, shown):
    """The file's text, or the failed verdict Harbor's verifier gives an empty one (RewardFileEmptyError)."""
    if os.path.getsize(path) == 0:
        return None, _failed(f"RewardFileEmptyError: Reward file is empty at {shown}")
    with open(path, "rb") as handle:
        return handle.read(_MAX_REWARD_BYTES).decode("utf-8", "replace"), None


def _numbers(text):
    """reward.json's object of numbers, or None when it is not one."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not all(
            isinstance(value, (int, float)) and not isinstance(value, bool) for value in doc.values()):
        return None
    return doc


def read_rewards(verifier_dir):
    """The verdict ``{"success", "reason", "score"}`` of the reward files in ``verifier_dir`` (shown to the user
    as Harbor names them, under ``/logs/verifier``)."""
    text_path = os.path.join(verifier_dir, "reward.txt")
    json_path = os.path.join(verifier_dir, "reward.json")
    extra = None
    if os.path.isfile(text_path):
        text, failure = _reward_file(text_path, "/logs/verifier/reward.txt")
        if failure:
            return failure
        try:
            reward = float(text)
        except ValueError:
            return _failed(f"VerifierOutputParseError: Failed to parse rewards from text file "
                           f"/logs/verifier/reward.txt: {text.strip()[:80]!r}")
        # Harbor reads reward.txt alone when both are there; reward.json's numbers are shown beside it
        if os.path.isfile(json_path) and os.path.getsize(json_path):
            extra = _numbers(_reward_file(json_path, "")[0])
    elif os.path.isfile(json_path):
        text, failure = _reward_file(json_path, "/logs/verifier/reward.json")
        if failure:
            return failure
        extra = _numbers(text)
        if extra is None:
            return _failed("VerifierOutputParseError: Failed to parse rewards from JSON file "
                           "/logs/verifier/reward.json: expected an object of numbers")
        if "reward" not in extra and len(extra) != 1:
            return _failed(f"VerifierOutputParseError: /logs/verifier/reward.json has no 'reward' key and "
                           f"{len(extra)} keys ({', '.join(sorted(extra)[:8])}): which is the reward is unclear")
        reward = float(extra["reward"] if "reward" in extra else next(iter(extra.values())))
    else:
        return _failed("RewardFileNotFoundError: No reward file found at /logs/verifier/reward.txt or "
                       "/logs/verifier/reward.json")
    if not math.isfinite(reward) or not 0.0 <= reward <= 1.0:
        return _failed(f"VerifierOutputParseError: the reward {reward!r} is not a finite number between 0.0 and 1.0")
    reason = f"reward {reward:g}"
    if extra:
        reason += " (reward.json: " + ", ".join(f"{key}={value:g}" for key, value in sorted(extra.items())) + ")"
    return {"success": reward == 1.0, "reason": reason, "score": reward}


def _tail(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()[-_TAIL:].strip()
    except OSError:
        return ""


def verify(timeout):
    home = os.path.abspath(STATE)
    verifier_dir = os.path.join(home, "logs", "verifier")
    os.makedirs(verifier_dir, exist_ok=True)
    # only what test.sh writes grades: a reward the agent left there beforehand is not its
    for name in ("reward.txt", "reward.json"):
        if os.path.lexists(os.path.join(verifier_dir, name)):
            os.remove(os.path.join(verifier_dir, name))
    _map_tree(os.path.join(home, "tests"), home)
    stdout_path = os.path.join(verifier_dir, "test-stdout.txt")
    with open(stdout_path, "wb") as out:
        try:
            done = subprocess.run([_shell(), os.path.join(home, "tests", "test.sh")], stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return _failed(f"VerifierTimeoutError: test.sh ran past {timeout:g}s")
    verdict = read_rewards(verifier_dir)
    if not verdict["success"]:
        tail = _tail(stdout_path)
        verdict["reason"] += f"; test.sh exited {done.returncode}" + (f": {tail}" if tail else "")
    return verdict


def solve():
    home = os.path.abspath(STATE)
    script = os.path.join(home, "solution", "solve.sh")
    if not os.path.isfile(script):
        print("this task has no solution/solve.sh: no oracle to run", file=sys.stderr)
        return 1
    os.makedirs(os.path.join(home, "logs", "agent"), exist_ok=True)
    _map_tree(os.path.join(home, "solution"), home)
    return subprocess.run([_shell(), script]).returncode


def main():
    if sys.argv[1:2] == ["solve"]:
        sys.exit(solve())
    timeout = float(sys.argv[2]) if sys.argv[1:2] == ["verify"] and len(sys.argv) > 2 else 600.0
    print(json.dumps(verify(timeout)))


if __name__ == "__main__":
    main()
