"""Text pack throughput embedded: record-evaluations per second of each metric through ``evalsi.evaluate(...)``
(records built from rows, the run planned and driven in this process, every record evaluated, results stored and
summarized), over sentence pairs like a translation or summarization test set's.

    .venv/bin/python benchmarks/pack_text.py [--records 20000] [--metrics bleu,rouge,...]

Prints one line per metric, ``metric  N rec/s  (target >= 20,000)`` (issue 16), with the CPU seconds and the load
average: the machine is shared. Dataset-scope metrics (corpus-bleu, corpus-chrf) count the records mapped and
reduced, bootstrap interval included. The first call of each metric (imports, nltk's stemmer, caches) is made on a
few rows beforehand and not timed.
"""

from __future__ import annotations

import argparse
import os
import random
import time

import evalsi

TARGET_PER_S = 20_000
METRICS = ("bleu", "corpus-bleu", "chrf", "corpus-chrf", "rouge", "meteor", "token-f1")
# Words of a news-like English vocabulary, with inflections (so stems matter) and punctuation.
_VOCABULARY = [
    "the", "a", "of", "to", "in", "and", "for", "on", "with", "that", "is", "was", "were", "be", "by", "at", "from",
    "as", "it", "its", "has", "have", "had", "this", "which", "said", "government", "minister", "president", "city",
    "country", "people", "year", "years", "week", "report", "reports", "reported", "talks", "talk", "market",
    "markets", "price", "prices", "rose", "fell", "rising", "falling", "percent", "million", "billion", "company",
    "companies", "new", "officials", "official", "police", "court", "ruling", "ruled", "election", "elections",
    "vote", "voted", "voting", "party", "parties", "agreement", "agreed", "plan", "plans", "planned", "public",
    "health", "school", "schools", "water", "energy", "climate", "change", "changes"
]


def rows(count: int, seed: int = 0) -> list[dict[str, str]]:
    """``count`` rows: a reference of 12 to 30 words and an output sharing most of it, reworded and reordered a
    little, each pair different."""
    rng = random.Random(seed)
    out = []
    for index in range(count):
        reference = [rng.choice(_VOCABULARY) for _ in range(rng.randint(12, 30))]
        output = [w if rng.random() > 0.25 else rng.choice(_VOCABULARY) for w in reference]
        cut = rng.randint(0, len(output) // 4)
        output = output[cut:] + output[:cut]
        out.append({"id": f"r{index}", "output": " ".join(output).capitalize() + ".",
                    "reference": " ".join(reference).capitalize() + "."})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="rows evaluated per metric")
    parser.add_argument("--metrics", default=",".join(METRICS), help="comma-separated evaluators to time")
    args = parser.parse_args()
    data = rows(args.records)
    print(f"{args.records} records per metric; load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"on {os.cpu_count()} CPUs")
    for metric in args.metrics.split(","):
        evalsi.evaluate(rows(50, seed=1), [metric])
        wall, cpu = time.perf_counter(), time.process_time()
        results = evalsi.evaluate(data, [metric])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        mean = next(iter(results.summaries.values())).mean
        print(f"{metric:<12} {args.records / wall:>9,.0f} rec/s  (target >= {TARGET_PER_S:,})  "
              f"cpu {cpu:.2f} s  wall {wall:.2f} s  mean {mean:.4f}")


if __name__ == "__main__":
    main()
