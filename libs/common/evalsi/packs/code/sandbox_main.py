"""The code pack's harness, run INSIDE the sandbox as ``python3 -I -S harness.py`` (standard library only).

It reads one JSON line on stdin: ``{"nonce": ..., "mode": "unit" | "exec", "timeout": seconds, "cases": [...]}``,
then runs the candidate (``candidate.py``) in child processes, one per test or case, and prints one line per result,
``<nonce> {"test": ..., "passed": ..., "detail": ...}``, then ``<nonce> {"done": true}``. The host reads only lines
that start with the nonce.

Why a child per test: the candidate never shares a process with the harness, so it cannot learn the nonce (read
from stdin before any child starts, never in a child's argv or environment, and this process is made
non-dumpable so a same-uid child cannot read its memory through /proc) and cannot forge a result line; one hung or
crashed test fails alone. In ``unit`` mode the child also gets a token of its own on stdin, read before the
candidate is loaded, and a test passes only when the child prints it after the test returned: exiting 0 early
(``os._exit(0)``) or printing "all passed" is not a pass. (Candidate and tests share the child's interpreter by
the nature of unit tests, so a candidate written to search that interpreter for the token could still find it;
``exec`` mode has no such gap: the harness compares the output itself.)
"""

import ast
import contextlib
import ctypes
import json
import secrets
import subprocess
import sys

DETAIL_CHARS = 600
_PR_SET_DUMPABLE = 4

# The child of a unit test: argv[1] is the test's name ("" runs the tests file's top level only).
CHILD = r"""
import os, sys, types, traceback, unittest
token = sys.stdin.readline().strip()
sys.stdin = open(os.devnull)
out = os.fdopen(os.dup(1), "w")
name = sys.argv[1]
module = types.ModuleType("candidate")
module.__file__ = "candidate.py"
sys.modules["candidate"] = sys.modules["solution"] = module
try:
    with open("candidate.py", encoding="utf-8") as f:
        exec(compile(f.read(), "candidate.py", "exec"), module.__dict__)
    space = dict(module.__dict__)
    space["__name__"] = "tests"
    with open("tests.py", encoding="utf-8") as f:
        exec(compile(f.read(), "tests.py", "exec"), space)
    if name:
        owner, _, method = name.partition(".")
        if method:
            cls = space[owner]
            if isinstance(cls, type) and issubclass(cls, unittest.TestCase):
                result = unittest.TestResult()
                cls(method).run(result)
                problems = result.failures + result.errors
                if problems:
                    sys.stderr.write(problems[0][1])
                    sys.exit(1)
                if result.skipped:
                    sys.stderr.write("skipped: " + str(result.skipped[0][1]))
                    sys.exit(1)
            else:
                getattr(cls(), method)()
        else:
            space[owner]()
except SystemExit:
    raise
except BaseException:
    traceback.print_exc()
    sys.exit(1)
out.write(token + " ok\n")
out.flush()
"""


def _nondumpable() -> None:
    # Without it the harness still never hands the nonce to a child.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _tests(source: str) -> list[str]:
    """Test names, in order: top-level ``test*`` functions and ``test*`` methods of top-level classes."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [""]  # the child reports the syntax error as the one test's failure
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef):
            names += [f"{node.name}.{item.name}" for item in node.body
                      if isinstance(item, ast.FunctionDef) and item.name.startswith("test")]
    return names or [""]


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text[-DETAIL_CHARS:]


def _ended(code: int, stderr: bytes) -> str:
    if code < 0:
        return f"killed by signal {-code}" + (f": {_tail(stderr)}" if stderr.strip() else "")
    return _tail(stderr) or f"exit status {code}"


def _run(argv: list[str], stdin: bytes, timeout: float) -> tuple[int | None, bytes, bytes]:
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        return None, exc.stdout or b"", exc.stderr or b""
    return done.returncode, done.stdout, done.stderr


def unit(timeout: float) -> list[dict[str, object]]:
    with open("tests.py", encoding="utf-8") as f:
        names = _tests(f.read())
    results: list[dict[str, object]] = []
    for name in names:
        token = secrets.token_hex(16)
        try:
            code, out, err = _run([sys.executable, "-I", "-c", CHILD, name], token.encode() + b"\n", timeout)
        except OSError as exc:
            results.append({"test": name or "tests", "passed": False, "detail": f"could not start: {exc}"})
            continue
        if code is None:
            results.append({"test": name or "tests", "passed": False, "detail": f"timeout after {timeout:g}s"})
            continue
        passed = code == 0 and f"{token} ok" in out.decode("utf-8", "replace").splitlines()
        detail = "" if passed else _ended(code, err) if code != 0 else "exited before the test finished"
        results.append({"test": name or "tests", "passed": passed, "detail": detail})
    return results


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def execute(cases: list[dict[str, str]], timeout: float) -> list[dict[str, object]]:
    results: list[dict[str, object]] = []
    for index, case in enumerate(cases):
        name = str(case.get("name") or f"case {index}")
        try:
            code, out, err = _run([sys.executable, "-I", "candidate.py"], case["input"].encode(), timeout)
        except OSError as exc:
            results.append({"test": name, "passed": False, "detail": f"could not start: {exc}"})
            continue
        if code is None:
            results.append({"test": name, "passed": False, "detail": f"timeout after {timeout:g}s"})
            continue
        got = out.decode("utf-8", "replace")
        if code != 0:
            results.append({"test": name, "passed": False, "detail": _ended(code, err)})
        elif _normal(got) == _normal(case["output"]):
            results.append({"test": name, "passed": True, "detail": ""})
        else:
            detail = f"expected {_normal(case['output'])[:200]!r}, got {_normal(got)[:200]!r}"
            results.append({"test": name, "passed": False, "detail": detail})
    return results


def main() -> int:
    request = json.loads(sys.stdin.readline())
    sys.stdin.close()
    _nondumpable()
    nonce = request["nonce"]
    timeout = float(request["timeout"])
    results = unit(timeout) if request["mode"] == "unit" else execute(request["cases"], timeout)
    for result in results:
        print(nonce, json.dumps(result), flush=True)
    print(nonce, json.dumps({"done": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
