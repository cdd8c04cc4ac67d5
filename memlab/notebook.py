"""Figures inline in Jupyter without ``%matplotlib``.

memlab builds its figures as :class:`matplotlib.figure.Figure` objects on the Agg canvas, never
through ``pyplot``, so the command line stays headless (no backend is chosen, no window opens,
no figure lingers in pyplot's registry). In a Jupyter kernel that left them shown as
``<Figure size 640x400 with 1 Axes>``: the kernel's inline backend
(``MPLBACKEND=module://matplotlib_inline.backend_inline``) registers IPython's PNG formatter for
Figure only when it is loaded, which happens when ``pyplot`` is imported (or ``%matplotlib``
runs), and memlab never imports ``pyplot``.

:func:`show_figures_inline` registers that formatter itself (IPython's own
``pylabtools.print_figure``, what ``%matplotlib inline`` registers), by the type's name so that
matplotlib is not imported for it. ``import memlab`` calls it: in an IPython kernel a returned
figure then displays as a PNG; outside IPython (scripts, the CLI) it does nothing. A formatter
already registered for Figure (``%matplotlib inline`` ran first, or the user chose one) is kept.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["show_figures_inline"]

_FIGURE = ("matplotlib.figure", "Figure")


def _png(fig: Any) -> Any:
    from IPython.core.pylabtools import print_figure

    return print_figure(fig, fmt="png", base64=True)


def _registered(formatter: Any) -> bool:
    """Whether ``formatter`` already has a printer for matplotlib's Figure (by name, or by the
    type once IPython resolved the name)."""
    if _FIGURE in getattr(formatter, "deferred_printers", {}):
        return True
    return any(getattr(t, "__module__", None) == _FIGURE[0] and t.__name__ == _FIGURE[1]
               for t in getattr(formatter, "type_printers", {}))


def show_figures_inline(shell: Any = None) -> bool:
    """Register a PNG display for matplotlib Figures in the running IPython shell (``shell``:
    default the current one, when IPython is loaded). Returns True when a PNG printer for
    Figure is in place afterwards (registered now or before), False outside IPython. (A terminal
    IPython has the formatter but shows only text: nothing changes there.)"""
    if shell is None:
        ipython = sys.modules.get("IPython")
        get = getattr(ipython, "get_ipython", None)
        shell = get() if get is not None else None
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters or "image/png" not in formatters:
        return False
    png = formatters["image/png"]
    if not _registered(png):
        png.for_type_by_name(*_FIGURE, _png)
    return True
