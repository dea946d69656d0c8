"""The lazy exports of evalsi, evalsi.stats, evalsi.judges and evalsi.cases (evalsi._lazy): each name is the object
its module defines, loads that module only when first used, and an unknown name is an ordinary AttributeError."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from evalsi._lazy import lazy_exports

PACKAGES = ["evalsi", "evalsi.stats", "evalsi.judges", "evalsi.cases", "evalsi.testing"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves_to_its_modules_object(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        defined_in = getattr(value, "__module__", None)  # a class or function: the module that defines it
        if defined_in is not None and getattr(value, "__name__", None) == name:
            assert getattr(sys.modules[defined_in], name) is value, f"{package}.{name}"
        assert vars(module)[name] is value  # cached: later lookups skip __getattr__
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match=rf"^module '{package}' has no attribute 'nope'$"):
        module.nope  # noqa: B018 - the attribute access is the test


def test_a_name_loads_its_module_on_first_use_only() -> None:
    # A fresh interpreter: evalsi.stats alone must not import scipy; its first interval does, once.
    probe = (
        "import sys, evalsi.stats as s\n"
        "before = 'evalsi.stats.intervals' in sys.modules\n"
        "w = s.wilson\n"
        "print(before, 'evalsi.stats.intervals' in sys.modules, 'wilson' in vars(s), w is s.wilson)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["False", "True", "True", "True"]


def test_relative_and_absolute_modules_and_a_name_exported_twice() -> None:
    namespace: dict[str, object] = {}
    load, listing = lazy_exports("evalsi.stats", namespace, {".defaults": ("DEFAULT_CONFIDENCE",),
                                                               "json": ("dumps",)})
    import json

    from evalsi.stats.defaults import DEFAULT_CONFIDENCE

    assert (load("DEFAULT_CONFIDENCE"), load("dumps")) == (DEFAULT_CONFIDENCE, json.dumps)
    assert namespace == {"DEFAULT_CONFIDENCE": DEFAULT_CONFIDENCE, "dumps": json.dumps}  # cached after first use
    assert listing() == ["DEFAULT_CONFIDENCE", "dumps"]
    with pytest.raises(ValueError, match="'dumps' is exported from both json and pickle"):
        lazy_exports("p", {}, {"json": ("dumps",), "pickle": ("dumps",)})
