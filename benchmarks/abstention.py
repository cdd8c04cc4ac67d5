"""The per-query abstention decision (recall.floor_mode 'learned'), measured k-fold by conversation.

    python benchmarks/abstention.py [--dataset memlab-lifelog] [--preset reverie]
                                    [--threshold 0.5] [--out abstain.skops]
                                    [--calibration same_language]

Replays the dataset under the preset (feature cache: bench.cache_dir), builds one row per question
(memlab.tune.abstainfit.questions_frame), predicts each conversation's questions with a model of
the others' and prints, per question language, abstention (refused / unanswerable), its precision
and answered (answered / answerable) at the threshold, and the abstention reached where answered
is 0.97 (the threshold read off the held-out predictions: an upper bound, not a tuned result).
``--out``: fit on every question and write the model (skops) with its data and config recorded.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memlab.bench.datasets.registry import load  # noqa: E402
from memlab.bench.misses import resolve_presets  # noqa: E402
from memlab.bench.run import replay_cached  # noqa: E402
from memlab.embed import make_embedder  # noqa: E402
from memlab.tune.abstainfit import abstention_table, fit_and_save, kfold, \
    questions_frame  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="memlab-lifelog")
    ap.add_argument("--path", default=None)
    ap.add_argument("--preset", default="reverie")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--calibration", default="same_language", choices=("none", "same_language", "all"),
                    help="recall.background_calibration of the replay (the README's figures: "
                         "same_language; memlab's default is none)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    cfg = resolve_presets([a.preset], overrides={"vram.enabled": False,
                                                 "recall.background_calibration": a.calibration})[0][1]
    ds = load(a.dataset, path=a.path)
    rep = replay_cached(ds, cfg, embedder=make_embedder(cfg), progress=False)
    frame = questions_frame(rep)
    report = kfold(frame, threshold=a.threshold)
    print(f"{a.dataset} ({a.preset}), leave-one-conversation-out, threshold {a.threshold}:")
    print(report.table().round(3).to_string())
    for lang in sorted(frame["language"].unique()):
        sel = (frame["language"] == lang).to_numpy()
        ans = frame["answerable"].to_numpy()
        p_ans = np.sort(report.p[sel & ans])
        if len(p_ans) and (sel & ~ans).any():
            thr = p_ans[int(np.floor(0.03 * len(p_ans)))]
            t = abstention_table(frame[sel], report.p[sel], thr)
            print(f"{lang}: at answered {t.loc['all', 'answered']:.3f} (threshold {thr:.3f} read "
                  f"off the held-out predictions) abstention {t.loc['all', 'abstention']:.3f}")
    if a.out:
        path = fit_and_save(frame, a.out, dataset={"name": ds.card.name,
                                                   "version": ds.card.version,
                                                   "hash": ds.content_hash()},
                            config={"preset": a.preset, "threshold": a.threshold})
        print(f"wrote {path}")
    print(f"wall {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
