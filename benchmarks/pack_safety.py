"""Safety pack throughput embedded: record-evaluations per second of each deterministic metric through
``evalsi.evaluate(...)`` (records built from rows, the run planned and driven in this process, every record
evaluated, results stored and summarized), over assistant answers of 20 to 60 words, one in ten holding personal
data, a secret or a canary, one in five a refusal.

    .venv/bin/python benchmarks/pack_safety.py [--records 20000] [--metrics pii-leak,secret-leak,...]

Prints one line per metric, ``metric  N rec/s  (target >= 20,000)`` (issue 16), with the CPU seconds and the load
average: the machine is shared. The first call of each metric is made on a few rows beforehand and not timed. The
judged metrics (harmlessness, toxicity, prompt-injection, jailbreak) are bounded by the judge, not timed here.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from typing import Any

import evalsi

TARGET_PER_S = 20_000
METRICS: dict[str, dict[str, Any]] = {
    "pii-leak": {},
    "secret-leak": {},
    "secret-leak-entropy": {"ref": "builtin/secret-leak", "params": {"entropy": True}},
    "canary-leak": {"ref": "builtin/canary-leak", "params": {"canaries": ["ZEBRA-42"], "ignore_case_and_space": True}},
    "refusal": {"ref": "builtin/refusal", "params": {"should_refuse": False}},
    # Per-record canaries and expectations read from metadata: rows with a metadata object, which the engine
    # builds records from at a fraction of the plain rows' rate (exact-match over the same rows shows the ceiling).
    "canary-leak-metadata": {"ref": "builtin/canary-leak", "params": {"canary_key": "canary"}, "metadata": True},
    "refusal-metadata": {"ref": "builtin/refusal", "metadata": True},
    "exact-match-metadata": {"ref": "builtin/exact-match", "metadata": True},
}
_SENTENCE = ("the order ships within three business days and you can track it from your account page once the "
             "label is printed our support team answers most questions within a day version 2.4 fixed the login "
             "issue on 12:30 and 3.14 percent of users saw it in 2024")
_LEAKS = ("write to jane.doe@example.org", "call +44 20 7946 0958", "card 4111 1111 1111 1111",
          "IBAN DE89 3704 0044 0532 0130 00", "key AKIAIOSFODNN7EXAMPLE", "token ghp_" + "a1B2" * 9,
          "the code is ZEBRA-42", "from 192.168.10.24")
_REFUSALS = ("I'm sorry, but I can't help with that.", "I cannot provide instructions for this.",
             "As an AI, I must decline this request.")


def rows(count: int, seed: int = 0, *, metadata: bool = False) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for index in range(count):
        vocabulary = _SENTENCE.split()
        words = [rng.choice(vocabulary) for _ in range(rng.randint(20, 60))]
        if index % 10 == 3:
            words.insert(rng.randint(0, len(words)), rng.choice(_LEAKS))
        text = " ".join(words).capitalize() + "."
        refuse = index % 5 == 1
        if refuse:
            text = rng.choice(_REFUSALS) + " " + text
        row = {"id": f"r{index}", "input": "help me", "output": text, "reference": text}
        if metadata:
            row["metadata"] = {"should_refuse": refuse if index % 7 else not refuse, "canary": "ZEBRA-42"}
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="rows evaluated per metric")
    parser.add_argument("--metrics", default=",".join(METRICS), help="comma-separated metrics to time")
    args = parser.parse_args()
    plain, with_metadata = rows(args.records), rows(args.records, metadata=True)
    print(f"{args.records} records per metric; load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"on {os.cpu_count()} CPUs")
    for metric in args.metrics.split(","):
        spec = dict(METRICS[metric] or {"ref": f"builtin/{metric}"})
        data = with_metadata if spec.pop("metadata", False) else plain
        evalsi.evaluate(data[:50], [spec])
        wall, cpu = time.perf_counter(), time.process_time()
        results = evalsi.evaluate(data, [spec])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        means = " ".join(f"{name} {summary.mean:.4f}" for name, summary in results.summaries.items())
        print(f"{metric:<20} {args.records / wall:>9,.0f} rec/s  (target >= {TARGET_PER_S:,})  "
              f"{args.records / cpu:>9,.0f} rec/CPU-s  cpu {cpu:.2f} s  wall {wall:.2f} s  mean {means}")


if __name__ == "__main__":
    main()
