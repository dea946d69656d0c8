"""SWE-bench's per-repository harness data: each repository's test command, log parser, Python version and install
command (by the instance's ``version``), the test directives it derives from a test patch, and the log parsers.

Read by the importer (``swebench.py``) on the host and shipped into the sandbox as ``.swebench/swebench_specs.py``
beside the patch-and-grade script, which runs it with the sandbox's ``python3``, in a SWE-bench image the
environment's own (Python 3.6 for django 3.x): so it imports the standard library only and keeps to Python 3.6
(annotations in quotes, so none is evaluated; no dataclasses, ``removeprefix`` or walrus).

The values follow SWE-bench's harness (``swebench/harness/constants/python.py``, ``log_parsers/python.py`` and
``test_spec/python.py``). Python versions and install commands are recorded for whoever builds an environment with
network (an image root); nothing here installs anything.
"""

import re
import shlex
from collections.abc import Callable
from typing import NamedTuple

PASSED, FAILED, SKIPPED, ERROR, XFAIL = "PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"
STATUSES = (FAILED, PASSED, SKIPPED, ERROR, XFAIL)

# SWE-bench's test commands, as its harness writes them; the instance's directives follow.
PYTEST = "pytest -rA"
PYTEST_ASTROPY_OLD = "pytest -rA -vv -o console_output_style=classic --tb=no -p no:nose"
DJANGO = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
DJANGO_NO_PARALLEL = "./tests/runtests.py --verbosity 2"
SEABORN = "pytest --no-header -rA"
SPHINX = "tox --current-env -epy39 -v --"
SYMPY = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"

PIP_EDITABLE = "python -m pip install -e ."
# The files a test patch touches that are data, not tests: left out of the directives, as SWE-bench leaves them
# ("csv" without its dot is SWE-bench's own spelling, kept so the same paths drop out).
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")
_DIFF_TARGET = re.compile(r"diff --git a/.* b/(.*)")


class Spec(NamedTuple):
    """What SWE-bench does for one repository at one version."""

    repo: str
    version: str
    python: str  # the environment's Python version
    install: str  # run in the repository once its requirements are in (needs the network)
    test_command: str  # SWE-bench's text; the directives are appended
    log_parser: str  # a key of PARSERS
    pre_install: "tuple[str, ...]" = ()  # commands SWE-bench runs before installing that the log's format depends on


# repo -> (log parser, [(versions, python, install, test command)]); the last row is the repository's newest.
_TABLE: "dict[str, tuple[str, list[tuple[str, str, str, str]]]]" = {
    "astropy/astropy": ("pytest_v2", [
        ("0.1 0.2 0.3 0.4 1.1 1.2 1.3", "3.6", "python -m pip install -e .[test] --verbose", PYTEST_ASTROPY_OLD),
        ("3.0 3.1 3.2 4.1 4.2 4.3 5.0 5.1 5.2", "3.9", "python -m pip install -e .[test] --verbose", PYTEST),
        ("v5.3", "3.10", "python -m pip install -e .[test] --verbose", PYTEST)]),
    "django/django": ("django", [
        ("1.9", "3.5", "python setup.py install", DJANGO_NO_PARALLEL),
        ("1.4 1.5 1.6 1.7 1.8 1.10 1.11 2.0 2.1 2.2", "3.5", "python setup.py install", DJANGO),
        ("3.0 3.1 3.2", "3.6", PIP_EDITABLE, DJANGO),
        ("4.0", "3.8", PIP_EDITABLE, DJANGO),
        ("4.1 4.2", "3.9", PIP_EDITABLE, DJANGO),
        ("5.0 5.1 5.2", "3.11", PIP_EDITABLE, DJANGO)]),
    "matplotlib/matplotlib": ("matplotlib", [
        ("1.0 1.1 1.2 1.3 1.4 1.5 2.0 2.1 2.2", "3.5", "python setup.py build; python setup.py install", PYTEST),
        ("3.0", "3.7", PIP_EDITABLE, PYTEST),
        ("3.1 3.2 3.3 3.4", "3.8", PIP_EDITABLE, PYTEST),
        ("3.5 3.6 3.7", "3.11", PIP_EDITABLE, PYTEST),
        ("3.8 3.9", "3.11", 'python -m pip install --no-build-isolation -e ".[dev]"', PYTEST)]),
    "mwaskom/seaborn": ("seaborn", [
        ("0.11", "3.9", PIP_EDITABLE, SEABORN),
        ("0.12 0.13 0.14", "3.9", "python -m pip install -e .[dev]", SEABORN)]),
    "pallets/flask": ("pytest", [
        ("2.0", "3.9", PIP_EDITABLE, PYTEST),
        ("2.1", "3.10", PIP_EDITABLE, PYTEST),
        ("2.2 2.3 3.0 3.1", "3.11", PIP_EDITABLE, PYTEST)]),
    "psf/requests": ("pytest_options", [
        ("0.7 0.8 0.9 0.11 0.13 0.14 1.1 1.2 2.0 2.2 2.3 2.4 2.5 2.7 2.8 2.9 2.10 2.11 2.12 2.17 2.18 2.19 2.22 "
         "2.25 2.26 2.27 2.31 3.0", "3.9", "python -m pip install .", PYTEST)]),
    "pydata/xarray": ("pytest", [
        ("0.12 0.18 0.19 0.20 2022.03 2022.06 2022.09 2023.07 2024.05", "3.10", PIP_EDITABLE, PYTEST)]),
    "pylint-dev/pylint": ("pytest_options", [
        ("2.8 2.9 2.10 2.11 2.13 2.14 2.15 2.16 2.17 3.0 3.1 3.2 3.3 4.0", "3.9", PIP_EDITABLE, PYTEST)]),
    "pytest-dev/pytest": ("pytest", [
        ("4.4 4.5 4.6 5.0 5.1 5.2 5.3 5.4 6.0 6.2 6.3 7.0 7.1 7.2 7.4 8.0 8.1 8.2 8.3 8.4", "3.9", PIP_EDITABLE,
         PYTEST)]),
    "scikit-learn/scikit-learn": ("pytest_v2", [
        ("0.20 0.21 0.22", "3.6", "python -m pip install -v --no-use-pep517 --no-build-isolation -e .", PYTEST),
        ("1.3 1.4 1.5 1.6", "3.9", "python -m pip install -v --no-use-pep517 --no-build-isolation -e .", PYTEST)]),
    "sphinx-doc/sphinx": ("pytest_v2", [
        ("1.5 1.6 1.7 1.8 2.0 2.1 2.2 2.3 2.4 3.0 3.1 3.2 3.3 3.4 3.5 4.0 4.1 4.2 4.3 4.4 4.5 5.0 5.1 5.2 5.3 6.0 "
         "6.2 7.0 7.1 7.2 7.3 7.4", "3.9", "python -m pip install -e .[test]", SPHINX),
        ("8.0 8.1", "3.10", "python -m pip install -e .[test]", SPHINX)]),
    "sympy/sympy": ("sympy", [
        ("0.7 1.0 1.1 1.2 1.4 1.5 1.6 1.7 1.8 1.9 1.10 1.11 1.12 1.13 1.14", "3.9", PIP_EDITABLE, SYMPY)]),
    # SWE-bench's further repositories (SWE-bench Lite and Verified draw on the twelve above)
    "marshmallow-code/marshmallow": ("pytest", [
        ("2.18 2.19 2.20 3.0 3.1 3.2 3.4 3.8 3.9 3.10 3.11 3.12 3.13 3.15 3.16 3.19", "3.9",
         "python -m pip install -e '.[dev]'", PYTEST)]),
    "pvlib/pvlib-python": ("pytest", [
        ("0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9", "3.9", "python -m pip install -e .[all]", PYTEST)]),
    "pydicom/pydicom": ("pytest_options", [
        ("1.0 1.1 1.2 1.3", "3.6", PIP_EDITABLE, PYTEST),
        ("1.4 2.0", "3.8", PIP_EDITABLE, PYTEST),
        ("2.1 2.2", "3.9", PIP_EDITABLE, PYTEST),
        ("2.3", "3.10", PIP_EDITABLE, PYTEST),
        ("2.4 3.0", "3.11", PIP_EDITABLE, PYTEST)]),
    "pylint-dev/astroid": ("pytest", [
        ("2.5 2.6 2.7 2.8 2.9 2.10 2.12 2.13 2.14 2.15 2.16 3.0", "3.9", PIP_EDITABLE, PYTEST)]),
    "pyvista/pyvista": ("pytest", [
        ("0.20 0.21 0.22 0.23 0.24 0.25 0.26 0.27 0.28 0.29 0.30 0.31 0.32 0.33 0.34 0.35 0.36 0.37 0.38 0.39 0.40 "
         "0.41 0.42 0.43", "3.9", PIP_EDITABLE, PYTEST)]),
    "sqlfluff/sqlfluff": ("pytest", [
        ("0.4 0.5 0.6 0.8 0.9 0.10 0.11 0.12 0.13 1.0 1.1 1.2 1.3 1.4 2.0 2.1 2.2", "3.9", PIP_EDITABLE, PYTEST)]),
}
# Sphinx's tests run under tox: SWE-bench adds -rA to tox.ini's pytest line so the log has pytest's summary.
_PRE_INSTALL = {"sphinx-doc/sphinx": ("sed -i 's/pytest/pytest -rA/' tox.ini",)}


def spec_for(repo: str, version: str) -> "Spec | None":
    """The spec of ``repo`` at ``version``: the row SWE-bench lists the version in, else the repository's newest;
    None for a repository SWE-bench does not know."""
    entry = _TABLE.get(repo)
    if entry is None:
        return None
    parser, rows = entry
    _versions, python, install, test_command = next((row for row in rows if version in row[0].split()), rows[-1])
    return Spec(repo, version, python, install, test_command, parser, _PRE_INSTALL.get(repo, ()))


def patch_directives(repo: str, test_patch: str) -> "list[str]":
    """What SWE-bench appends to the test command: the files the test patch touches, less data files; for django
    the dotted test module (``tests/`` and ``.py`` dropped), which its runner takes."""
    directives = [path for path in _DIFF_TARGET.findall(test_patch) if not path.endswith(NON_TEST_EXTS)]
    if repo != "django/django":
        return directives
    modules = []
    for path in directives:
        path = path[:-len(".py")] if path.endswith(".py") else path
        path = path[len("tests/"):] if path.startswith("tests/") else path
        modules.append(path.replace("/", "."))
    return modules


def run_argv(test_command: str, directives: "list[str]", python: str) -> "tuple[list[str], dict[str, str]]":
    """``(argv, extra environment)`` that runs ``test_command`` on ``directives`` with the interpreter ``python``:
    every SWE-bench test command is a Python program (``pytest`` and ``tox`` as modules, a script by its path), so
    none depends on a shebang, an executable bit or what is on PATH; leading ``NAME=value`` words are variables."""
    words = shlex.split(test_command)
    env = {}
    while words and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words:
        raise ValueError(f"test command {test_command!r}: no program")
    program, arguments = words[0], words[1:]
    head = [python, "-m", program] if program in ("pytest", "tox") else [python, program]
    return head + arguments + list(directives), env


# --- log parsers: log text -> {test name: status}, read as SWE-bench reads each runner's log ---------------------

_STATUS = "|".join(STATUSES)
_STATUS_FIRST = re.compile(r"^(" + _STATUS + r")\s+(\S+)")
_TEST_FIRST = re.compile(r"^(\S+)\s+(" + _STATUS + r")(?:\s|$)")
_SKIP_COUNT = re.compile(r"\[\d+\]")  # "SKIPPED [2] path:line: reason" names no test


def _pytest_line(line: str) -> "tuple[str, str] | None":
    """``(test, status)`` of a result line: ``STATUS test ...`` (-rA's summary) or ``test STATUS ...`` (-v)."""
    match = _STATUS_FIRST.match(line)
    if match:
        status, test = match.groups()
        return None if status == SKIPPED and _SKIP_COUNT.match(test) else (test, status)
    match = _TEST_FIRST.match(line)
    return (match.group(1), match.group(2)) if match else None


def parse_log_pytest(log: str) -> "dict[str, str]":
    """pytest ``-rA``: the test id is the first word after the status, so an id with a space in its parameters is
    cut at the space, as SWE-bench's FAIL_TO_PASS and PASS_TO_PASS lists write it."""
    statuses = {}
    for line in log.split("\n"):
        parsed = _pytest_line(line)
        if parsed:
            statuses[parsed[0]] = parsed[1]
    return statuses


_OPTION = re.compile(r"(.*?)\[(.*)\]")


def parse_log_pytest_options(log: str) -> "dict[str, str]":
    """pytest, with a parameter that is an absolute path cut to its last part (``[/tmp/x/y.txt]`` -> ``[/y.txt]``),
    as SWE-bench keys requests', pylint's and pydicom's tests, whose paths differ from machine to machine."""
    statuses = {}
    for test, status in parse_log_pytest(log).items():
        match = _OPTION.search(test)
        if match:
            main, option = match.groups()
            if option.startswith("/") and not option.startswith("//") and "*" not in option:
                option = "/" + option.split("/")[-1]
            test = f"{main}[{option}]"
        statuses[test] = status
    return statuses


_COLOUR = re.compile(r"\[(\d+)m")
_CONTROL = str.maketrans("", "", "".join(chr(code) for code in range(1, 32)))


def parse_log_pytest_v2(log: str) -> "dict[str, str]":
    """pytest with colour (astropy, scikit-learn, sphinx under tox): escape codes and control characters dropped
    from each line first."""
    statuses = {}
    for line in log.split("\n"):
        parsed = _pytest_line(_COLOUR.sub("", line).translate(_CONTROL))
        if parsed:
            statuses[parsed[0]] = parsed[1]
    return statuses


def parse_log_matplotlib(log: str) -> "dict[str, str]":
    """matplotlib: ``STATUS test`` lines only, with the mouse buttons in parameters written as numbers (their
    repr changed between versions)."""
    statuses = {}
    for line in log.split("\n"):
        line = line.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3")
        if line.startswith(STATUSES):
            words = (line.replace(" - ", " ") if line.startswith(FAILED) else line).split()
            if len(words) > 1:
                statuses[words[1]] = words[0]
    return statuses


def parse_log_seaborn(log: str) -> "dict[str, str]":
    """seaborn: only ``FAILED test`` and ``PASSED`` lines (either order); its errors, skips and xfails are absent."""
    statuses = {}
    for line in log.split("\n"):
        words = line.split()
        if line.startswith(FAILED):
            if len(words) > 1:
                statuses[words[1]] = FAILED
        elif f" {PASSED} " in line:
            if words[1:2] == [PASSED]:
                statuses[words[0]] = PASSED
        elif line.startswith(PASSED) and len(words) > 1:
            statuses[words[1]] = PASSED
    return statuses


_DJANGO_PASS_SUFFIXES = (" ... ok", " ... OK", " ...  OK")
# A test whose line a long message interrupts, its "ok" on a later line (SWE-bench's three observed forms).
_DJANGO_INTERRUPTED = [
    re.compile(r"^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$",
               re.MULTILINE),
    re.compile(r"^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$", re.MULTILINE),
    re.compile(r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$", re.MULTILINE),
]


def parse_log_django(log: str) -> "dict[str, str]":
    """django's runner at verbosity 2: ``name (module.Class) ... ok|FAIL|ERROR|skipped 'why'``; a test's output
    between ``...`` and its ``ok`` (the ``ok`` alone on a later line) passes the last test named; ``FAIL: name
    (module.Class)`` and ``ERROR: ...`` blocks mark the bare name (their first word), as SWE-bench does."""
    statuses = {}
    previous = None
    for line in log.split("\n"):
        line = line.strip()
        if "--version is equivalent to version" in line:  # a test whose output spans lines
            statuses["--version is equivalent to version"] = PASSED
        if " ... " in line:
            previous = line.split(" ... ")[0]
        for suffix in _DJANGO_PASS_SUFFIXES:
            if line.endswith(suffix):
                # django__django-7188 prints a migration's progress on the test's line
                if line.startswith("Applying sites.0002_alter_domain_unique...test_no_migrations"):
                    line = line.split("...", 1)[-1].strip()
                statuses[line.rsplit(suffix, 1)[0]] = PASSED
                break
        if " ... skipped" in line:
            statuses[line.split(" ... skipped")[0]] = SKIPPED
        if line.endswith(" ... FAIL"):
            statuses[line.split(" ... FAIL")[0]] = FAILED
        if line.startswith("FAIL:"):
            statuses[line.split()[1].strip()] = FAILED
        if line.endswith(" ... ERROR"):
            statuses[line.split(" ... ERROR")[0]] = ERROR
        if line.startswith("ERROR:"):
            statuses[line.split()[1].strip()] = ERROR
        if line.startswith("ok") and previous is not None:
            statuses[previous] = PASSED
    for pattern in _DJANGO_INTERRUPTED:
        for match in pattern.finditer(log):
            statuses[match.group(1)] = PASSED
    return statuses


_SYMPY_FAILURE_HEADER = re.compile(r"(_*) (.*)\.py:(.*) (_*)")


def parse_log_sympy(log: str) -> "dict[str, str]":
    """sympy's ``bin/test --verbose``: ``test_name ok|F|E`` lines; a traceback's header ``___ path.py:test ___``
    marks ``path.py:test`` failed. The last test of each file carries the file's ``[OK]``/``[FAIL]`` on its line,
    which this reading, like SWE-bench's, does not see."""
    statuses = {}
    for match in _SYMPY_FAILURE_HEADER.finditer(log):
        statuses[f"{match.group(2)}.py:{match.group(3)}"] = FAILED
    for line in log.split("\n"):
        line = line.strip()
        if not line.startswith("test_"):
            continue
        for suffix, status in ((" E", ERROR), (" F", FAILED), (" ok", PASSED)):
            if line.endswith(suffix):
                statuses[line.split()[0]] = status
    return statuses


PARSERS: "dict[str, Callable[[str], dict[str, str]]]" = {
    "pytest": parse_log_pytest,
    "pytest_options": parse_log_pytest_options,
    "pytest_v2": parse_log_pytest_v2,
    "matplotlib": parse_log_matplotlib,
    "seaborn": parse_log_seaborn,
    "django": parse_log_django,
    "sympy": parse_log_sympy,
}
