"""The consolidation plan as a figure (Familiars §5.9): which entries of a cell would merge, and
how close each is to its cluster's medoid. Built on the Agg canvas, never through ``pyplot``;
re-exported as ``memlab.plots.consolidation_plan``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from memlab.errors import InvalidInput

if TYPE_CHECKING:
    from memlab.lifecycle.consolidate import Plan

__all__ = ["consolidation_plan"]


def consolidation_plan(plan: "Plan", *, threshold: float | None = None, ax=None) -> Figure:
    """One bar per source entry of each cluster: its cosine to the cluster's medoid (the medoid
    itself 1), clusters in their own colour and order, each labelled with its cluster, cell and
    id (the texts are in ``plan.to_frame()``; a Chinese text needs a CJK font that matplotlib may
    not have); ``threshold`` (``consolidation.similarity_threshold``) as a dashed line. A plan
    with no cluster draws a line saying so. ``plan``: what
    :meth:`memlab.api.MemoryStore.consolidate` (``dry_run=True``) or
    :func:`memlab.lifecycle.consolidate.plan_consolidation` returns."""
    if not hasattr(plan, "clusters") or not hasattr(plan, "to_frame"):
        raise InvalidInput("plan", "a consolidation Plan (store.consolidate(dry_run=True)[0])",
                           type(plan).__name__)
    frame = plan.to_frame()
    if ax is None:
        fig = Figure(figsize=(7.0, max(2.0, 0.4 * len(frame) + 1.2)), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
    fig = ax.figure
    cells = sorted({f"{r.scope}/{r.category}" for r in frame.itertuples()})
    where = cells[0] if len(cells) == 1 else f"{len(cells)} cells"
    ax.set_title(f"{where}: consolidation plan, cosine to the medoid")
    if frame.empty:
        ax.text(0.5, 0.5, f"nothing to consolidate ({plan.candidates} live entries in "
                f"{plan.groups} cells)", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    y = list(range(len(frame)))[::-1]
    colours = {c: f"C{i % 10}" for i, c in enumerate(dict.fromkeys(frame["cluster"]))}
    ax.barh(y, frame["similarity"], color=[colours[c] for c in frame["cluster"]], height=0.6)
    labels = [f"#{r.cluster} {r.scope}/{r.category}: {r.id}" + (" (medoid)" if r.medoid else "")
              for r in frame.itertuples()]
    ax.set_yticks(y, labels, fontsize="small")
    if threshold is not None:
        ax.axvline(threshold, color="grey", ls="--", label=f"threshold {threshold:g}")
        ax.legend(loc="lower left", fontsize="small")
    lo = min([*frame["similarity"], threshold if threshold is not None else 1.0])
    ax.set_xlim(max(0.0, lo - 0.1), 1.02)
    ax.set_xlabel("cosine to the cluster's medoid")
    return fig
