"""The files of a bench run (``memlab bench --out-dir``), each written on its own: a file that
cannot be written is named and counted, and costs only itself.

Layout of a run folder (:func:`run_folder`: ``<out_dir>/<time stamp>-<dataset>``)::

    report.json                          the bench report (BenchOutcome.to_json), written first
    recall_curve.png  per_category.png   the presets side by side (more than one preset)
    vram/                                the VRAM gate's trace and timeline (with a gate)
    <preset>/                            config.yaml, per_query.csv, aggregate.csv,
                                         recall_curve.png, per_category.png

A preset's folder is its name made safe and unique (:func:`preset_folders`: ``tuned/locomo`` ->
``tuned-locomo``), distinct from the run folder's own entries.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from memlab.bench.run import BenchOutcome
from memlab.errors import MemlabError
from memlab.files import safe_name, unique_names

#: the run folder's own entries: no preset folder takes these names
RUN_ENTRIES = ("report.json", "recall_curve.png", "per_category.png", "vram")
#: what a file that cannot be written raises (a full disk, no permission, a folder in the way, a
#: path memlab refuses); anything else is a bug and propagates
WRITE_ERRORS = (OSError, MemlabError)


@dataclass
class Artifacts:
    """Where a run's files went: the run folder, each preset's folder, and the files that could
    not be written (``{"path", "error"}``, in the order tried)."""

    run_dir: Path
    folders: dict[str, Path]
    errors: list[dict[str, str]] = field(default_factory=list)

    def attempt(self, path: Path, write: Callable[[Path], object]) -> bool:
        """``write(path)``; a :data:`WRITE_ERRORS` is recorded in ``.errors``, not raised."""
        try:
            write(path)
        except WRITE_ERRORS as exc:
            self.errors.append({"path": str(path), "error": f"{type(exc).__name__}: {exc}"})
            return False
        return True


def preset_folders(names: Iterable[str]) -> dict[str, str]:
    """Preset name -> its folder's name in a run folder (see the module doc)."""
    return unique_names(names, reserved=RUN_ENTRIES)


def run_folder(out_dir: Path, dataset: str, *, stamp: str | None = None) -> Path:
    """``<out_dir>/<stamp>-<dataset>`` (stamp: now, ``YYYYmmdd-HHMMSS``), the name made safe."""
    return Path(out_dir) / safe_name(f"{stamp or time.strftime('%Y%m%d-%H%M%S')}-{dataset}")


def write_artifacts(out: BenchOutcome, run_dir: Path) -> Artifacts:
    """Write the run folder ``run_dir`` (see the module doc): report.json first, then per preset
    its config YAML, per-query rankings and metrics (CSV), a recall@k curve and a per-category bar
    chart (PNG); the presets' shared plots; with a VRAM gate its trace and timeline in ``vram/``.
    A file (or folder) that cannot be written is in ``.errors`` and the rest are still written."""
    from memlab.bench import plots

    run_dir = Path(run_dir)
    arts = Artifacts(run_dir, {name: run_dir / folder for name, folder in
                               preset_folders(r.name for r in out.results).items()})
    if not arts.attempt(run_dir, lambda p: p.mkdir(parents=True, exist_ok=True)):
        return arts
    report = json.dumps(out.to_json(), ensure_ascii=False, indent=1)
    arts.attempt(run_dir / "report.json", lambda p: p.write_text(report, encoding="utf-8"))
    ks = out.results[0].config.bench.ks
    name = out.dataset.card.name
    names = out.dataset.category_names()
    for r in out.results:
        d = arts.folders[r.name]
        if not arts.attempt(d, lambda p: p.mkdir(exist_ok=True)):
            continue
        pq = r.per_query.copy()
        pq["ranking"] = [json.dumps(r.rankings[q], ensure_ascii=False) for q in pq.index]
        one = {r.name: r.aggregate}
        arts.attempt(d / "config.yaml", r.config.to_yaml)
        arts.attempt(d / "per_query.csv", pq.to_csv)
        arts.attempt(d / "aggregate.csv", r.aggregate.to_csv)
        arts.attempt(d / "recall_curve.png",
                     lambda p: plots.save(plots.recall_curve(one, ks=ks, dataset=name), p))
        arts.attempt(d / "per_category.png",
                     lambda p: plots.save(plots.per_category_bars(one, dataset=name,
                                                                     names=names), p))
    if len(out.results) > 1:
        aggs = {r.name: r.aggregate for r in out.results}
        arts.attempt(run_dir / "recall_curve.png",
                     lambda p: plots.save(plots.recall_curve(aggs, ks=ks, dataset=name), p))
        arts.attempt(run_dir / "per_category.png",
                     lambda p: plots.save(plots.per_category_bars(aggs, dataset=name,
                                                                     names=names), p))
    if out.vram is not None:
        arts.attempt(run_dir / "vram", out.vram.write)
    return arts
