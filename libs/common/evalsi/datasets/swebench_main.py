"""SWE-bench's patch-and-grade steps, run INSIDE the sandbox as ``.swebench/swebench.py`` (stdlib only, 3.6 on).

- ``python3 .swebench/swebench.py apply PATCH``: applies a unified diff (``git diff`` output: modified, new and
  deleted files) to the workspace, as ``git apply`` would; exits 1 naming the hunk that does not apply. A CLI agent
  that only applies a prediction's ``model_patch`` is this command.
- ``python3 .swebench/swebench.py check``: the checker. Applies ``.swebench/test.patch`` (the instance's
  ``test_patch``), runs the tests of ``.swebench/tests.json`` (``FAIL_TO_PASS`` and ``PASS_TO_PASS``) and grades
  as SWE-bench does: resolved when no ``FAIL_TO_PASS`` or ``PASS_TO_PASS`` test failed (``FAILED``, ``ERROR``, or
  did not run; ``PASSED`` and ``XFAIL`` pass, a ``SKIPPED`` one counts for neither). It prints one JSON line
  ``{"success", "reason", "score"}`` (score: the share of the graded tests that passed). For a repository SWE-bench
  knows, ``.swebench/spec.json`` names its test command, log parser and the directives the importer derived from the
  test patch (``swebench_specs.py``, shipped beside this script): the command runs on the directives, its output
  (stdout and stderr together, kept in ``.swebench/test.log``) read by that parser. For another repository, with
  pytest importable the tests run under ``pytest -rA``, read by SWE-bench's pytest parser; without it (the runtime
  image), each ``path::function`` or ``path::Class::method`` test is called in a child process and passes when it
  returns.
"""

import importlib
import json
import os
import re
import subprocess
import sys

if __package__:  # imported from the package (the importer reads this file's text; tests): the module beside it
    from evalsi.datasets import swebench_specs as specs
else:  # run in the sandbox as .swebench/swebench.py: swebench_specs.py lies beside it, first on sys.path
    specs = importlib.import_module("swebench_specs")

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_TEST_TIMEOUT_S = 120
_LOG = ".swebench/test.log"
_LOG_LIMIT = 64 << 20  # bytes of test output read; a longer log is not graded

_CHILD = r"""
import importlib.util, sys
path, names = sys.argv[1], sys.argv[2:]
sys.path.insert(0, ".")
spec = importlib.util.spec_from_file_location("swebench_test_module", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
target = module
for name in names[:-1]:
    target = getattr(target, name)
    if isinstance(target, type):
        target = target()
getattr(target, names[-1])()
"""


def _strip(path):
    return path.split("/", 1)[1] if path.startswith(("a/", "b/")) else path


def _file_patches(text):
    """[(old path or None, new path or None, [hunk lines])] of a unified diff."""
    patches, current = [], None
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "):
            old = line[4:].split("\t")[0].strip()
            new = lines[index + 1][4:].split("\t")[0].strip()
            current = (None if old == "/dev/null" else _strip(old), None if new == "/dev/null" else _strip(new), [])
            patches.append(current)
            index += 2
            continue
        if current is not None and (line.startswith(("@@", " ", "+", "-", "\\")) or line == ""):
            current[2].append(line)
        index += 1
    return patches


def _apply_hunks(original, hunk_lines, name):
    result, cursor = [], 0
    index = 0
    while index < len(hunk_lines):
        match = _HUNK.match(hunk_lines[index])
        index += 1
        if not match:
            continue
        old, new = [], []
        while index < len(hunk_lines) and not hunk_lines[index].startswith("@@"):
            line = hunk_lines[index]
            index += 1
            if line.startswith("\\"):
                continue
            tag, body = (line[0], line[1:]) if line else (" ", "")
            if tag in " -":
                old.append(body)
            if tag in " +":
                new.append(body)
        start = max(int(match.group(1)) - 1, 0) if old else int(match.group(1))
        at = _find(original, old, start, cursor)
        if at is None:
            raise SystemExit(f"patch does not apply: {name}: hunk {match.group(0)}")
        result.extend(original[cursor:at])
        result.extend(new)
        cursor = at + len(old)
    result.extend(original[cursor:])
    return result


def _find(lines, block, start, floor):
    """Where ``block`` sits in ``lines``: at ``start`` or the nearest offset from it, never before ``floor``."""
    for offset in range(len(lines) + 1):
        for at in (start - offset, start + offset):
            if floor <= at <= len(lines) - len(block) and lines[at:at + len(block)] == block:
                return at
    return None


def apply(patch_path):
    with open(patch_path, encoding="utf-8") as handle:
        patches = _file_patches(handle.read())
    if not patches:
        raise SystemExit(f"{patch_path}: no file changes in the patch")
    for old, new, hunks in patches:
        target = new or old
        if os.path.isabs(target) or ".." in target.split("/"):
            raise SystemExit(f"patch does not apply: {target}: outside the workspace")
        original = []
        if old is not None:
            with open(old, encoding="utf-8") as handle:
                original = handle.read().split("\n")
            if original and original[-1] == "":
                original.pop()
        if new is None:
            os.remove(old)
            continue
        lines = _apply_hunks(original, hunks, target)
        os.makedirs(os.path.dirname(new) or ".", exist_ok=True)
        with open(new, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n" if lines else "")


def _logged_statuses(argv, extra_env, parser, label, timeout):
    """Runs ``argv`` with its output (stdout and stderr together, as SWE-bench's log has them) in ``.swebench/test.log``
    and reads it with ``parser``: ``(statuses, note)``, the note saying why the log gave no result."""
    with open(_LOG, "wb") as log:
        try:
            subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **extra_env),
                           timeout=timeout)
        except subprocess.TimeoutExpired:
            return {}, "the tests timed out"
    if os.path.getsize(_LOG) > _LOG_LIMIT:
        return {}, f"the test log is over {_LOG_LIMIT >> 20} MiB"
    with open(_LOG, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    statuses = parser(text)
    if statuses:
        return statuses, ""
    tail = text.strip().splitlines()[-1:] or ["(empty)"]
    return statuses, f"no test result in the log of {label!r} (its last line: {tail[0][:200]})"


def _spec_statuses(spec, wanted):
    """The repository's own runner on the test patch's directives, read as SWE-bench's parser for it reads its log."""
    argv, extra = specs.run_argv(spec["test_command"], spec["directives"], sys.executable)
    return _logged_statuses(argv, extra, specs.PARSERS[spec["log_parser"]], spec["test_command"],
                            _TEST_TIMEOUT_S * max(len(wanted), 1))


def _pytest_statuses(tests):
    return _logged_statuses([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *tests], {},
                            specs.parse_log_pytest, "pytest -rA", _TEST_TIMEOUT_S * max(len(tests), 1))


def _child_statuses(tests):
    statuses = {}
    for test in tests:
        path, _, names = test.partition("::")
        if not names:
            statuses[test] = "ERROR"
            continue
        try:
            done = subprocess.run([sys.executable, "-c", _CHILD, path, *names.split("::")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=_TEST_TIMEOUT_S)
            statuses[test] = "PASSED" if done.returncode == 0 else "FAILED"
        except subprocess.TimeoutExpired:
            statuses[test] = "FAILED"
    return statuses


def check():
    with open(".swebench/tests.json", encoding="utf-8") as handle:
        tests = json.load(handle)
    if os.path.getsize(".swebench/test.patch"):
        try:
            apply(".swebench/test.patch")
        except (SystemExit, OSError) as exc:
            print(json.dumps({"success": False, "reason": f"the test patch does not apply: {exc}"}))
            return
    wanted = list(dict.fromkeys(tests["FAIL_TO_PASS"] + tests["PASS_TO_PASS"]))
    note = ""
    if os.path.exists(".swebench/spec.json"):
        with open(".swebench/spec.json", encoding="utf-8") as handle:
            statuses, note = _spec_statuses(json.load(handle), wanted)
    else:
        try:
            import pytest  # noqa: F401 - only whether the root has it

            statuses, note = _pytest_statuses(wanted)
        except ImportError:
            statuses = _child_statuses(wanted)
    # SWE-bench's test_passed and test_failed: a skipped test is neither, and counts for neither list
    f2p, p2p = ([t for t in tests[key] if statuses.get(t) in ("PASSED", "XFAIL")] for key in ("FAIL_TO_PASS",
                                                                                                "PASS_TO_PASS"))
    failing = [t for t in wanted if statuses.get(t, "FAILED") in ("FAILED", "ERROR")]
    graded = len(f2p) + len(p2p) + len(failing)
    reason = (f"FAIL_TO_PASS {len(f2p)}/{len(tests['FAIL_TO_PASS'])}, PASS_TO_PASS "
              f"{len(p2p)}/{len(tests['PASS_TO_PASS'])}" + (f"; failing: {', '.join(failing[:10])}" if failing else "")
              + (f"; {note}" if note else ""))
    print(json.dumps({"success": not failing, "reason": reason,
                      "score": (len(f2p) + len(p2p)) / graded if graded else 1.0}))


def main():
    if sys.argv[1:2] == ["apply"] and len(sys.argv) == 3:
        apply(sys.argv[2])
    elif sys.argv[1:] == ["check"]:
        check()
    else:
        raise SystemExit("usage: swebench.py apply PATCH | swebench.py check")


if __name__ == "__main__":
    main()
