"""ml-classic and ml-monitoring throughput embedded: record-evaluations per second of each metric through
``evalsi.evaluate(...)`` (records built from rows, the run planned and driven in this process, every record
evaluated, results stored and summarized; for a dataset metric its map, one reduce and the default 2,000 bootstrap
re-reduces for its interval), over tabular rows: three classes with probabilities, four features, a numeric
label for the regression metrics, a ranked list of ten ids for the ranking metrics, and a reference split of a
fifth of the rows for drift.

    .venv/bin/python benchmarks/pack_ml.py [--records 20000] [--metrics correct,classification,...]

Prints one line per metric, ``metric  N rec/s  (target >= 20,000)`` (issue 16), with the CPU seconds (and records
per CPU-second) and the load average: the machine is shared. The first call of each metric is made on a few rows
beforehand and not timed.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from typing import Any

import evalsi

TARGET_PER_S = 20_000
_CLASSES = ("cat", "dog", "emu")
_FEATURES = {"age": "age", "income": "income", "city": "city", "score": "score"}
METRICS: dict[str, dict[str, Any]] = {
    "correct": {"rows": "classes"},
    "classification": {"rows": "classes"},
    "positive-class": {"rows": "classes", "params": {"positive_label": "cat"}},
    "confusion-matrix": {"rows": "classes"},
    "roc-auc": {"rows": "classes"},
    "pr-auc": {"rows": "classes"},
    "log-loss": {"rows": "classes"},
    "brier": {"rows": "classes"},
    "ece": {"rows": "classes"},
    "regression": {"rows": "numbers"},
    "ranking": {"rows": "ranked"},
    "psi": {"rows": "classes", "params": {"feature": "age"}},
    "ks": {"rows": "classes", "params": {"feature": "age"}},
    "js-divergence": {"rows": "classes", "params": {"feature": "age"}},
    "data-quality": {"rows": "classes", "params": {"features": {"age": {"type": "number", "min": 18, "max": 90},
                                                                "city": {"type": "string"}}}},
    "fairness": {"rows": "classes", "params": {"sensitive": "city", "positive_label": "cat"}},
}


def rows(count: int, kind: str, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for index in range(count):
        row: dict[str, Any] = {"id": f"r{index}"}
        if kind == "classes":
            weights = [rng.random() + 0.05 for _ in _CLASSES]
            total = sum(weights)
            probabilities = {name: weight / total for name, weight in zip(_CLASSES, weights, strict=True)}
            truth = rng.choice(_CLASSES) if index % 3 else max(probabilities, key=probabilities.__getitem__)
            features = {"age": rng.randint(16, 95), "income": round(rng.lognormvariate(10, 0.5)),
                        "city": rng.choice(("Ljubljana", "Maribor", "Celje", "Koper")), "score": rng.random()}
            row |= {"reference": truth, "output": {"row": {
                "features": features, "prediction": max(probabilities, key=probabilities.__getitem__),
                "probabilities": probabilities}}}
            if index % 5 == 0:
                row["metadata"] = {"split": "reference"}
        elif kind == "numbers":
            truth = rng.gauss(50, 10)
            row |= {"reference": truth, "output": {"row": {"prediction": truth + rng.gauss(0, 3)}}}
        else:
            ranked = rng.sample(range(30), 10)
            row |= {"reference": {str(item): rng.randint(1, 3) for item in rng.sample(range(30), 4)},
                    "output": [str(item) for item in ranked]}
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="rows evaluated per metric")
    parser.add_argument("--metrics", default=",".join(METRICS), help="comma-separated metrics to time")
    args = parser.parse_args()
    data = {kind: rows(args.records, kind) for kind in ("classes", "numbers", "ranked")}
    print(f"{args.records} records per metric; load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"on {os.cpu_count()} CPUs")
    for metric in args.metrics.split(","):
        spec = dict(METRICS[metric])
        chosen = data[spec.pop("rows")]
        spec["ref"] = f"builtin/{metric}"
        evalsi.evaluate(chosen[:50], [spec])
        wall, cpu = time.perf_counter(), time.process_time()
        results = evalsi.evaluate(chosen, [spec])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        means = " ".join(f"{name} {summary.mean:.4f}" for name, summary in list(results.summaries.items())[:4])
        print(f"{metric:<18} {args.records / wall:>9,.0f} rec/s  (target >= {TARGET_PER_S:,})  "
              f"cpu {cpu:.2f} s ({args.records / cpu:,.0f} per CPU-s)  wall {wall:.2f} s  {means}", flush=True)


if __name__ == "__main__":
    main()
