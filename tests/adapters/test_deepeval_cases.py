"""The DeepEval adapter's record <-> test case mapping (pure), and that the adapter's package loads without DeepEval
(the host that loads its plugin has none)."""

from __future__ import annotations

import subprocess
import sys

from evalsi.adapters.deepeval import PLUGIN_DIR, UPSTREAM
from evalsi.adapters.deepeval.cases import case_fields, case_row
from evalsi.plugins.manifest import MANIFEST_NAME, read_manifest
from evalsi.records import make_record


def test_a_record_maps_to_a_test_case_and_back() -> None:
    row = {"id": "r1", "input": "Capital of France?", "output": "Paris", "reference": "Paris",
           "context": ["Paris is the capital of France.", "France is in Europe."], "metadata": {"topic": "geo"}}
    fields = case_fields(make_record(**row))
    assert fields == {"input": "Capital of France?", "actual_output": "Paris", "expected_output": "Paris",
                      "retrieval_context": ["Paris is the capital of France.", "France is in Europe."],
                      "context": ["Paris is the capital of France.", "France is in Europe."]}
    assert case_row(**fields, name="r1", metadata={"topic": "geo"}) == row
    bare = case_fields(make_record(input="hi", output="hello"))
    assert bare == {"input": "hi", "actual_output": "hello"}  # absent fields stay absent, never ""
    assert case_row(input="q", actual_output=None, context=["c"]) == {"input": "q", "context": ["c"]}


def test_the_package_names_its_plugin_without_importing_deepeval() -> None:
    code = ("import sys, evalsi.adapters.deepeval as d; print(d.PLUGIN_DIR); "
            "print('deepeval' in sys.modules, d.OFFLINE_ENV['DEEPEVAL_TELEMETRY_OPT_OUT'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == [str(PLUGIN_DIR), "False 1"]
    manifest = read_manifest(PLUGIN_DIR / MANIFEST_NAME)
    assert manifest.package == UPSTREAM and manifest.share_host_packages
    assert (manifest.tier, manifest.upstream) == ("wrapped", UPSTREAM)
    assert manifest.entrypoint == "evalsi.adapters.deepeval.metrics:pack"
