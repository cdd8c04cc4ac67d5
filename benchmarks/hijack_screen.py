"""The hijack screen on its labelled set (issue 19, item 9): precision and recall per language,
what it misses and refuses wrongly, and its cost per text.

    python benchmarks/hijack_screen.py                       # tests/data/hijack_screen.jsonl
    python benchmarks/hijack_screen.py --repeat 20 --json results/hijack_screen.json

A text counts as refused when :func:`memlab.safety.find_hijack` names a rule for it with the
default ``safety`` configuration (what ``store.add`` refuses as ``UnsafeWrite`` in its text
field). Precision = refused hijacks / refused texts; recall = refused hijacks / hijacks. The cost
is the median over the set of each text's best time of ``--repeat`` screens (the compiled rules
and tables built before timing). Not a test: timings depend on the machine and its load;
``tests/safety/test_screen_set.py`` holds the figures as floors.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memlab.config import SafetyConfig  # noqa: E402
from memlab.safety import find_hijack  # noqa: E402

SET = Path(__file__).resolve().parents[1] / "tests" / "data" / "hijack_screen.jsonl"


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def scores(rows: list[dict], refused: list[bool]) -> dict[str, dict[str, float]]:
    """{language or 'all': {hijacks, benign, tp, fp, precision, recall}}."""
    out = {}
    for lang in sorted({r["language"] for r in rows}) + ["all"]:
        pick = [(r, x) for r, x in zip(rows, refused) if lang in ("all", r["language"])]
        tp = sum(x for r, x in pick if r["label"] == "hijack")
        fp = sum(x for r, x in pick if r["label"] == "benign")
        hij = sum(r["label"] == "hijack" for r, _ in pick)
        out[lang] = {"hijacks": hij, "benign": len(pick) - hij, "tp": tp, "fp": fp,
                     "precision": tp / (tp + fp) if tp + fp else 1.0,
                     "recall": tp / hij if hij else 1.0}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", type=Path, default=SET)
    ap.add_argument("--repeat", type=int, default=5, help="timings per text (best kept)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    cfg = SafetyConfig()
    rows = load(args.set)
    hits = [find_hijack(r["text"], cfg) for r in rows]   # also builds the tables and rules
    refused = [h is not None for h in hits]
    times = []
    for r in rows:
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            find_hijack(r["text"], cfg)
            best = min(best, time.perf_counter() - t0)
        times.append(best)
    table = scores(rows, refused)
    print(f"{'language':<9} {'hijacks':>7} {'benign':>6} {'refused':>7} {'wrongly':>7} "
          f"{'precision':>9} {'recall':>6}")
    for lang, s in table.items():
        print(f"{lang:<9} {s['hijacks']:>7} {s['benign']:>6} {s['tp']:>7} {s['fp']:>7} "
              f"{s['precision']:>9.3f} {s['recall']:>6.3f}")
    median_us = statistics.median(times) * 1e6
    print(f"\ncost per text: median {median_us:.1f} us, max {max(times) * 1e6:.1f} us "
          f"({len(rows)} texts, best of {args.repeat}; {platform.processor() or platform.machine()})")
    missed = [r for r, x in zip(rows, refused) if r["label"] == "hijack" and not x]
    wrong = [(r, h) for r, h in zip(rows, hits) if r["label"] == "benign" and h is not None]
    print(f"\nmissed ({len(missed)}):")
    for r in missed:
        print(f"  {r['id']} {r['kind']:<16} {r['text'][:70]!r}")
    print(f"refused although benign ({len(wrong)}):")
    for r, h in wrong:
        print(f"  {r['id']} {r['kind']:<16} {h.rule:<20} {r['text'][:60]!r}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"scores": table, "median_us": median_us,
                                         "missed": [r["id"] for r in missed],
                                         "wrongly_refused": [r["id"] for r, _ in wrong]},
                                        indent=2), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
