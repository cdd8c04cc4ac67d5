"""The per-query abstention decision (recall.floor_mode 'learned'), measured k-fold by conversation.

    python benchmarks/abstention.py [--dataset memlab-lifelog] [--preset reverie]
                                    [--features base,types] [--off-topic] [--answered 0.97]
                                    [--C 1.0] [--threshold T] [--out abstain.skops]
                                    [--calibration same_language]

Replays the dataset under the preset (feature cache: bench.cache_dir), builds one row per question
(memlab.tune.abstainfit.questions_frame), predicts each conversation's questions with a model of
the others' and prints, per question language, abstention (refused / unanswerable), its precision
and answered (answered / answerable) at a threshold per language chosen on the training folds
alone so that ``--answered`` of their answerable questions are answered (recall.abstain_answered),
and the held-out AUC (``--threshold``: one fixed threshold instead, the README's first figures with
``--features base --threshold 0.5``). ``--off-topic``: memlab's background questions (146 per language) are asked
of each conversation's store as extra unanswerable training rows (never counted in the table).
``--out``: fit on every question and write the model (skops) with its data and config recorded,
and print the per-language thresholds (recall.abstain_threshold_zh / _en) it should run with.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.metrics import roc_auc_score  # noqa: E402

from memlab.bench.datasets.registry import load  # noqa: E402
from memlab.bench.misses import resolve_presets  # noqa: E402
from memlab.bench.run import replay_cached  # noqa: E402
from memlab.embed import make_embedder  # noqa: E402
from memlab.recall.abstain import TYPE_FEATURES, Z_FEATURES  # noqa: E402
from memlab.recall.background import load_questions  # noqa: E402
from memlab.tune.abstainfit import loco_predictions, fit_and_save, kfold, language_thresholds, \
    questions_frame, with_off_topic  # noqa: E402

GROUPS = {"base": ("best_z", "best_zq", "best_zm", "z_gap", "best_lexical", "best_bm25",
                   "best_entity"), "types": TYPE_FEATURES, "z": Z_FEATURES}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="memlab-lifelog")
    ap.add_argument("--path", default=None)
    ap.add_argument("--preset", default="reverie")
    ap.add_argument("--features", default="base,types",
                    help=f"groups of query features, comma-separated: {', '.join(GROUPS)}")
    ap.add_argument("--off-topic", action="store_true")
    ap.add_argument("--answered", type=float, default=None,
                    help="share of answerable questions to answer (default: "
                         "recall.abstain_answered)")
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--threshold", type=float, default=None,
                    help="one fixed threshold for every language instead of the chosen ones")
    ap.add_argument("--out", default=None)
    ap.add_argument("--calibration", default="same_language", choices=("none", "same_language", "all"),
                    help="recall.background_calibration of the replay (the README's figures: "
                         "same_language; memlab's default is none)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    features = tuple(f for g in a.features.split(",") for f in GROUPS[g.strip()])
    cfg = resolve_presets([a.preset], overrides={"vram.enabled": False,
                                                 "recall.background_calibration": a.calibration})[0][1]
    answered = cfg.recall.abstain_answered if a.answered is None else a.answered
    ds = load(a.dataset, path=a.path)
    if a.off_topic:
        ds = with_off_topic(ds, load_questions(cfg.recall), cfg.recall)
    rep = replay_cached(ds, cfg, embedder=make_embedder(cfg), progress=False)
    frame = questions_frame(rep, cfg.recall)
    if a.threshold is None:
        report = kfold(frame, C=a.C, features=features, answered=answered)
        how = f"thresholds per language chosen on the training folds for answered >= {answered}"
    else:
        report = kfold(frame, C=a.C, features=features, threshold=a.threshold)
        how = f"threshold {a.threshold}"
    print(f"{a.dataset} ({a.preset}; features {a.features}; off-topic {a.off_topic}; C {a.C}), "
          f"leave-one-conversation-out, {how}:")
    print(report.table().round(3).to_string())
    own = ~report.frame["extra"].to_numpy(bool)
    for lang in ("zh", "en"):
        sel = own & (report.frame["language"] == lang).to_numpy()
        y = report.frame["answerable"].to_numpy(bool)[sel]
        if y.any() and not y.all():
            print(f"{lang}: held-out AUC {roc_auc_score(y, report.p[sel]):.3f}")
    if a.out:
        chosen = language_thresholds(frame, loco_predictions(frame, a.C, features), answered)
        path = fit_and_save(frame, a.out, dataset={"name": ds.card.name,
                                                   "version": ds.card.version,
                                                   "hash": ds.content_hash(),
                                                   "off_topic": a.off_topic},
                            config={"preset": a.preset, "answered": answered,
                                    "calibration": a.calibration, "thresholds": chosen},
                            C=a.C, features=features,
                            recall=cfg.replace(**{"recall.abstain_answered": answered}).recall)
        print(f"wrote {path}; run it with recall.abstain_threshold_zh: {chosen['zh']:.4f}, "
              f"recall.abstain_threshold_en: {chosen['en']:.4f}")
    print(f"wall {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
