"""Names a package exports but loads on first use (PEP 562), so importing the package costs nothing heavy.

A package that fronts slow modules (numpy, scipy, aiohttp, grpc behind them) lists its names by module and
installs the two module hooks::

    __getattr__, __dir__ = lazy_exports(__name__, globals(), {".bootstrap": ("percentile_bootstrap",), ...})

and keeps ``if TYPE_CHECKING:`` imports of the same names, which is what type checkers and IDEs read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, namespace: dict[str, Any], modules: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` whose module globals are ``namespace``.

    ``modules`` maps a module (absolute, or relative to ``package`` with a leading dot) to the names it defines
    that the package exports. A name loads its module on first access and is then stored in ``namespace``, so
    later lookups never reach ``__getattr__`` again.
    """
    origin: dict[str, str] = {}
    for module, names in modules.items():
        for name in names:
            if name in origin:
                raise ValueError(f"{package}: {name!r} is exported from both {origin[name]} and {module}")
            origin[name] = module

    def load(name: str) -> Any:
        module = origin.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        namespace[name] = value
        return value

    def listing() -> list[str]:
        return sorted({*namespace, *origin})

    return load, listing
