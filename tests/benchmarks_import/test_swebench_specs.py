"""SWE-bench's harness data (evalsi/datasets/swebench_specs.py): each log parser on a log written in its runner's
exact format (status lines, tracebacks between them, parametrized ids with spaces and brackets, unicode), the
directives derived from realistic test patches, the per-repository spec, and the module's fitness to run in the
sandbox (standard library only, Python 3.6 syntax)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from evalsi.datasets import swebench_main, swebench_specs
from evalsi.datasets.swebench_specs import (
    ERROR,
    FAILED,
    PARSERS,
    PASSED,
    SKIPPED,
    XFAIL,
    patch_directives,
    run_argv,
    spec_for,
)

PYTEST_LOG = """\
============================= test session starts ==============================
platform linux -- Python 3.9.19, pytest-7.4.0, pluggy-1.3.0
rootdir: /testbed
configfile: setup.cfg
collected 7 items

tests/test_utils.py ..F.sxE                                              [100%]

==================================== ERRORS ====================================
____________________ ERROR at setup of test_needs_database _____________________

    @pytest.fixture
    def database():
>       raise RuntimeError("no database: connexion refusée")
E       RuntimeError: no database: connexion refusée

tests/test_utils.py:12: RuntimeError
=================================== FAILURES ===================================
________________________ test_requote_uri[http://x/%ZZ] ________________________

    def test_requote_uri(uri):
>       assert requote_uri(uri) == uri
E       AssertionError: assert 'http://x/%25ZZ' == 'http://x/%ZZ'
E         - http://x/%ZZ
E         + http://x/%25ZZ

tests/test_utils.py:40: AssertionError
==================================== PASSES ====================================
___________________________ test_unicode[naïve-café] ___________________________
----------------------------- Captured stdout call -----------------------------
café → cafe
=========================== short test summary info ============================
PASSED tests/test_utils.py::test_ok
PASSED tests/test_utils.py::test_unicode[naïve-café]
PASSED tests/test_utils.py::test_split[a b-expected0]
PASSED tests/test_utils.py::TestQuote::test_quote[[]]
SKIPPED [1] tests/test_utils.py:50: requires network
XFAIL tests/test_utils.py::test_known_bug - reason: #1234
FAILED tests/test_utils.py::test_requote_uri[http://x/%ZZ] - AssertionError: assert 'http://x/%25ZZ' == 'ht...
ERROR tests/test_utils.py::test_needs_database - RuntimeError: no database: connexion refusée
=========== 1 failed, 3 passed, 1 skipped, 1 xfailed, 1 error in 0.12s ===========
"""

# What each pytest-style parser makes of PYTEST_LOG: an id with a space in its parameters is cut at the space, as
# SWE-bench's FAIL_TO_PASS/PASS_TO_PASS lists write it; the skip summary names no test.
PYTEST_STATUSES = {
    "tests/test_utils.py::test_ok": PASSED,
    "tests/test_utils.py::test_unicode[naïve-café]": PASSED,
    "tests/test_utils.py::test_split[a": PASSED,
    "tests/test_utils.py::TestQuote::test_quote[[]]": PASSED,
    "tests/test_utils.py::test_known_bug": XFAIL,
    "tests/test_utils.py::test_requote_uri[http://x/%ZZ]": FAILED,
    "tests/test_utils.py::test_needs_database": ERROR,
    # the ERRORS section's header reads as "<test> ERROR": a key no test id has, as SWE-bench's parser makes it
    "_" * 20: ERROR,
}


def test_pytest_parser_reads_the_ra_summary() -> None:
    assert PARSERS["pytest"](PYTEST_LOG) == PYTEST_STATUSES
    # -v puts the status after the id; a skip with its id counts as skipped; an id with a space is not read there
    verbose = ("testing/test_mark.py::test_marker_expr[not (a and b)] PASSED  [ 25%]\n"
               "testing/test_mark.py::TestMark::test_skip SKIPPED (no network) [ 50%]\n"
               "testing/test_mark.py::test_ünïcode FAILED                     [ 75%]\n"
               "Traceback: the line below is output, not a result\n"
               "    assert x == 'PASSED'\n")
    assert PARSERS["pytest"](verbose) == {"testing/test_mark.py::TestMark::test_skip": SKIPPED,
                                          "testing/test_mark.py::test_ünïcode": FAILED}


def test_pytest_options_parser_keys_a_path_parameter_by_its_last_part() -> None:
    log = PYTEST_LOG + (
        "PASSED tests/test_requests.py::test_file_upload[/tmp/pytest-of-root/pytest-0/test0/données.txt]\n"
        "PASSED tests/test_requests.py::test_unc[//server/share/a.txt]\n"
        "FAILED tests/test_requests.py::test_glob[/tmp/*.txt] - OSError: [Errno 2]\n")
    assert PARSERS["pytest_options"](log) == {
        **PYTEST_STATUSES,
        "tests/test_requests.py::test_file_upload[/données.txt]": PASSED,
        "tests/test_requests.py::test_unc[//server/share/a.txt]": PASSED,  # a UNC path and a glob are kept whole
        "tests/test_requests.py::test_glob[/tmp/*.txt]": FAILED,
    }


def test_pytest_v2_parser_drops_colour_codes_and_control_characters() -> None:
    log = ("py39: commands[0]> python -X dev -m pytest -rA --durations 25 tests/test_build_html.py\n"
           "\x1b[32mPASSED\x1b[0m tests/test_build_html.py::test_html5_output[markup.html-expect0]\n"
           "\x1b[31m\x1b[1mFAILED\x1b[0m tests/test_build_html.py::test_numfig[index.html-expect1] - "
           "AssertionError: 'Fig. 1' != 'Рис. 1'\r\n"
           "astropy/units/tests/test_quantity.py::test_repr[μm] PASSED\n"
           "\x1b[33mSKIPPED\x1b[0m [2] tests/test_build_latex.py:1405: needs latexmk\n"
           "py39: exit 1 (2.15 seconds) /testbed> python -X dev -m pytest -rA pid=118\n")
    assert PARSERS["pytest_v2"](log) == {
        "tests/test_build_html.py::test_html5_output[markup.html-expect0]": PASSED,
        "tests/test_build_html.py::test_numfig[index.html-expect1]": FAILED,
        "astropy/units/tests/test_quantity.py::test_repr[μm]": PASSED}
    # the plain pytest parser does not see a status behind an escape code
    assert "tests/test_build_html.py::test_html5_output[markup.html-expect0]" not in PARSERS["pytest"](log)


def test_matplotlib_parser_writes_mouse_buttons_as_numbers() -> None:
    log = ("PASSED lib/matplotlib/tests/test_backend_bases.py::test_interactive_zoom[MouseButton.LEFT]\n"
           "FAILED lib/matplotlib/tests/test_widgets.py::test_span_selector_drag[MouseButton.RIGHT] - "
           "AssertionError: (1, 2) != (1, 3)\n"
           "lib/matplotlib/tests/test_axes.py::test_hist PASSED [ 10%]\n"
           "XFAIL lib/matplotlib/tests/test_text.py::test_font_styles[ünicode] - reason: font missing\n")
    assert PARSERS["matplotlib"](log) == {
        "lib/matplotlib/tests/test_backend_bases.py::test_interactive_zoom[1]": PASSED,
        "lib/matplotlib/tests/test_widgets.py::test_span_selector_drag[3]": FAILED,
        "lib/matplotlib/tests/test_text.py::test_font_styles[ünicode]": XFAIL}  # -v lines are not read


def test_seaborn_parser_reads_passes_and_failures_only() -> None:
    log = ("tests/_core/test_plot.py::TestPlotting::test_theme PASSED  [ 20%]\n"
           "PASSED tests/test_core.py::TestHueMapping::test_init_from_map[hue vals]\n"
           "FAILED tests/test_core.py::TestVectorPlotter::test_long_df - KeyError: 'größe'\n"
           "ERROR tests/test_distributions.py::TestKDE::test_cut - ImportError: scipy\n"
           "XFAIL tests/test_relational.py::test_legend - known\n")
    assert PARSERS["seaborn"](log) == {
        "tests/_core/test_plot.py::TestPlotting::test_theme": PASSED,
        "tests/test_core.py::TestHueMapping::test_init_from_map[hue": PASSED,
        "tests/test_core.py::TestVectorPlotter::test_long_df": FAILED}


DJANGO_LOG = """\
Testing against Django installed in '/testbed/django'
Importing application queries
Found 8 test(s).
Skipping setup of unused database(s): other.
Operations to perform:
  Synchronize unmigrated apps: auth, contenttypes, messages, queries, sessions, staticfiles
  Apply all migrations: admin, sites
Running migrations:
  Applying admin.0001_initial... OK
  Applying sites.0002_alter_domain_unique... OK
System check identified no issues (1 silenced).
test_combine_and_empty (queries.test_q.QTests) ... ok
test_deconstruct (queries.test_q.QTests) ... FAIL
test_deconstruct_or (queries.test_q.QTests) ... ERROR
test_json_field (queries.test_q.QTests) ... skipped "Database doesn't support feature(s): supports_json_field"
test_reconstruct (queries.test_q.QTests) ... a warning the code wrote: ünïcode ✓
ok
test_filter_docstring (queries.tests.Queries1Tests)
Filtering on a related field named « naïve » works (#10153). ... ok
test_runserver_addrport (admin_scripts.tests.ManageRunserver) ... System check identified no issues (0 silenced)
ok
test_ticket_7181 (queries.tests.Queries1Tests.test_ticket_7181) ... ok

======================================================================
ERROR: test_deconstruct_or (queries.test_q.QTests)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/testbed/tests/queries/test_q.py", line 41, in test_deconstruct_or
    path, args, kwargs = q.deconstruct()
ValueError: not enough values to unpack (expected 3, got 2)

======================================================================
FAIL: test_deconstruct (queries.test_q.QTests)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/testbed/tests/queries/test_q.py", line 30, in test_deconstruct
    self.assertEqual(kwargs, {'price__gt': 1})
AssertionError: {'_connector': 'AND'} != {'price__gt': 1}

----------------------------------------------------------------------
Ran 8 tests in 0.012s

FAILED (failures=1, errors=1, skipped=1)
"""


def test_django_parser_reads_verbosity_2_with_its_multi_line_quirks() -> None:
    assert PARSERS["django"](DJANGO_LOG) == {
        "test_combine_and_empty (queries.test_q.QTests)": PASSED,
        "test_deconstruct (queries.test_q.QTests)": FAILED,
        "test_deconstruct_or (queries.test_q.QTests)": ERROR,
        "test_json_field (queries.test_q.QTests)": SKIPPED,
        "test_reconstruct (queries.test_q.QTests)": PASSED,  # its "ok" after the test's own output
        "Filtering on a related field named « naïve » works (#10153).": PASSED,  # a docstring names the test
        "test_runserver_addrport (admin_scripts.tests.ManageRunserver)": PASSED,
        "test_ticket_7181 (queries.tests.Queries1Tests.test_ticket_7181)": PASSED,  # Python 3.11's description
        # the traceback blocks' headers, keyed by their first word, as SWE-bench keys them
        "test_deconstruct": FAILED,
        "test_deconstruct_or": ERROR,
    }


SYMPY_LOG = """\
============================= test process starts ==============================
executable:         /opt/miniconda3/envs/testbed/bin/python  (3.9.19-final-0) [CPython]
architecture:       64-bit
cache:              no
ground types:       python
numpy:              None
random seed:        48391523
hash randomization: on (PYTHONHASHSEED=2741193046)

sympy/printing/tests/test_pretty.py[4]
test_pretty_ascii_str ok
test_pretty_ψ F
test_issue_7117 E
test_pretty_sum ok                                                        [FAIL]

sympy/core/tests/test_basic.py[2]
test_subs ok
test_atoms ok                                                               [OK]

________________________________________________________________________________
_____________ sympy/printing/tests/test_pretty.py:test_pretty_ψ ______________
Traceback (most recent call last):
  File "/testbed/sympy/printing/tests/test_pretty.py", line 40, in test_pretty_ψ
    assert pretty(ψ) == "ψ"
AssertionError
________________________________________________________________________________
____________ sympy/printing/tests/test_pretty.py:test_issue_7117 _____________
Traceback (most recent call last):
  File "/testbed/sympy/printing/tests/test_pretty.py", line 50, in test_issue_7117
    e = Eq(x + 1, x/2)
NameError: name 'Eq' is not defined

= tests finished: 4 passed, 1 failed, 1 exceptions, in 0.51 seconds =
DO *NOT* COMMIT!
"""


def test_sympy_parser_reads_verbose_lines_and_failure_headers() -> None:
    assert PARSERS["sympy"](SYMPY_LOG) == {
        "test_pretty_ascii_str": PASSED,
        "test_pretty_ψ": FAILED,
        "test_issue_7117": ERROR,
        "test_subs": PASSED,
        "sympy/printing/tests/test_pretty.py:test_pretty_ψ": FAILED,
        "sympy/printing/tests/test_pretty.py:test_issue_7117": FAILED,
    }  # test_pretty_sum and test_atoms end in their file's [FAIL]/[OK]: absent, as under SWE-bench


DJANGO_PATCH = """\
diff --git a/tests/auth_tests/test_validators.py b/tests/auth_tests/test_validators.py
--- a/tests/auth_tests/test_validators.py
+++ b/tests/auth_tests/test_validators.py
@@ -237,7 +237,7 @@ def test_unicode_validator(self):
-        invalid_usernames = ["o'connell", "عبد ال"]
+        invalid_usernames = ["o'connell", "عبد ال", "zerowidth\\u200Bspace", "trailingnewline\\u000A"]
diff --git a/tests/fixtures_regress/fixtures/big-fixture.json b/tests/fixtures_regress/fixtures/big-fixture.json
new file mode 100644
--- /dev/null
+++ b/tests/fixtures_regress/fixtures/big-fixture.json
@@ -0,0 +1 @@
+[]
diff --git a/tests/i18n/sampleproject/update_catalogs.py b/tests/i18n/sampleproject/update_catalogs.py
--- a/tests/i18n/sampleproject/update_catalogs.py
+++ b/tests/i18n/sampleproject/update_catalogs.py
@@ -1 +1 @@
-x = 1
+x = 2
"""
SYMPY_PATCH = """\
diff --git a/sympy/core/tests/test_basic.py b/sympy/core/tests/test_basic.py
--- a/sympy/core/tests/test_basic.py
+++ b/sympy/core/tests/test_basic.py
@@ -1,3 +1,4 @@
+from sympy import Eq
diff --git a/sympy/printing/tests/test_latex.py b/sympy/printing/tests/test_latex.py
--- a/sympy/printing/tests/test_latex.py
+++ b/sympy/printing/tests/test_latex.py
@@ -10 +10 @@
-    assert latex(x) == "x"
+    assert latex(ψ) == r"\\psi"
diff --git a/doc/src/modules/printing.md b/doc/src/modules/printing.md
--- a/doc/src/modules/printing.md
+++ b/doc/src/modules/printing.md
@@ -1 +1 @@
-a
+b
"""


def test_directives_follow_swebench() -> None:
    # django: dotted modules, tests/ and .py dropped; data files (.json) left out
    assert patch_directives("django/django", DJANGO_PATCH) == ["auth_tests.test_validators",
                                                               "i18n.sampleproject.update_catalogs"]
    # sympy and the pytest repositories: the paths themselves
    assert patch_directives("sympy/sympy", SYMPY_PATCH) == ["sympy/core/tests/test_basic.py",
                                                            "sympy/printing/tests/test_latex.py"]
    renamed = ("diff --git a/testing/test_old.py b/testing/test_new.py\nsimilarity index 90%\n"
               "rename from testing/test_old.py\nrename to testing/test_new.py\n"
               "diff --git a/changelog/5221.bugfix.rst b/changelog/5221.bugfix.rst\nnew file mode 100644\n")
    # the file's new name; an .rst is not among SWE-bench's data extensions, so it stays
    assert patch_directives("pytest-dev/pytest", renamed) == ["testing/test_new.py", "changelog/5221.bugfix.rst"]
    assert patch_directives("pytest-dev/pytest", "") == []


def test_each_repository_runs_its_own_command_with_the_sandbox_python() -> None:
    django = spec_for("django/django", "3.0")
    assert django is not None and (django.python, django.install, django.log_parser) == (
        "3.6", "python -m pip install -e .", "django")
    assert run_argv(django.test_command, ["auth_tests.test_validators"], "/usr/bin/python3") == (
        ["/usr/bin/python3", "./tests/runtests.py", "--verbosity", "2", "--settings=test_sqlite", "--parallel", "1",
         "auth_tests.test_validators"], {})
    old = spec_for("django/django", "1.9")
    assert old is not None and (old.python, old.install, old.test_command) == (
        "3.5", "python setup.py install", "./tests/runtests.py --verbosity 2")
    sympy = spec_for("sympy/sympy", "1.1")
    assert sympy is not None and sympy.log_parser == "sympy"
    assert run_argv(sympy.test_command, ["sympy/core/tests/test_basic.py"], "python3") == (
        ["python3", "bin/test", "-C", "--verbose", "sympy/core/tests/test_basic.py"],
        {"PYTHONWARNINGS": "ignore::UserWarning,ignore::SyntaxWarning"})
    sphinx = spec_for("sphinx-doc/sphinx", "8.1")
    assert sphinx is not None and sphinx.python == "3.10" and sphinx.pre_install
    assert run_argv(sphinx.test_command, ["tests/test_ext_autodoc.py"], "python3")[0] == [
        "python3", "-m", "tox", "--current-env", "-epy39", "-v", "--", "tests/test_ext_autodoc.py"]
    astropy = spec_for("astropy/astropy", "1.3")
    assert astropy is not None and astropy.python == "3.6" and "-vv" in astropy.test_command
    # a version SWE-bench does not list takes the repository's newest; an unknown repository has none
    newest = spec_for("django/django", "9.9")
    assert newest is not None and newest.python == "3.11"
    assert spec_for("evals/calc", "0.1") is None
    parsers = {repo: spec.log_parser for repo in (
        "astropy/astropy", "django/django", "matplotlib/matplotlib", "mwaskom/seaborn", "pallets/flask",
        "psf/requests", "pydata/xarray", "pylint-dev/pylint", "pytest-dev/pytest", "scikit-learn/scikit-learn",
        "sphinx-doc/sphinx", "sympy/sympy") if (spec := spec_for(repo, ""))}
    assert parsers == {"astropy/astropy": "pytest_v2", "django/django": "django", "matplotlib/matplotlib": "matplotlib",
                       "mwaskom/seaborn": "seaborn", "pallets/flask": "pytest", "psf/requests": "pytest_options",
                       "pydata/xarray": "pytest", "pylint-dev/pylint": "pytest_options",
                       "pytest-dev/pytest": "pytest", "scikit-learn/scikit-learn": "pytest_v2",
                       "sphinx-doc/sphinx": "pytest_v2", "sympy/sympy": "sympy"}


@pytest.mark.parametrize("module", [swebench_specs, swebench_main])
def test_the_sandbox_modules_need_only_the_standard_library_and_python_3_6(module: object) -> None:
    source = Path(str(getattr(module, "__file__", ""))).read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 6))  # SyntaxError on anything newer
    # an import tried for whether the root has it (pytest, ImportError caught) is not a need
    optional = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.Try)
                and any("ImportError" in ast.unparse(handler.type or ast.Name("")) for handler in node.handlers)
                for statement in node.body for inner in ast.walk(statement)}
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                and id(node) not in optional for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.module != "evalsi.datasets"}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
