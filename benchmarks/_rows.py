"""The rows the embedded benchmarks evaluate: run_million-shaped (id, input, output, reference), four in five
outputs equal to their reference and one in five differing (lower case and a trailing " ."), so exact-match's
default normalization decides and a fifth of the results fail with an explanation."""

from __future__ import annotations

_ANSWERS = ("Paris", "144", "Jane Austen", "Au", "Jupiter", "1989", "Tokyo", "Mars")


def benchmark_rows(n: int) -> list[dict[str, str]]:
    rows = []
    for i in range(n):
        reference = _ANSWERS[i % len(_ANSWERS)]
        output = reference if i % 5 else reference.lower() + " ."
        rows.append({"id": f"r{i}", "input": f"question {i}", "output": output, "reference": reference})
    return rows
