"""Benchmarks: datasets, replay, metrics, significance, plots and MLflow tracking.

The package is also a function: ``memlab.bench(dataset, *, presets=..., track=..., ...)`` runs
``memlab bench`` from Python (:func:`memlab.bench.workbench.bench`; its parameters are in
``help(memlab.bench)`` and ``inspect.signature(memlab.bench)``). The function is imported when
first called, so importing a benchmark module stays as cheap as before.
"""

from __future__ import annotations

import sys
import types

__all__: list[str] = []

_DOC = __doc__


class _CallablePackage(types.ModuleType):
    """The module type of ``memlab.bench``: calling it calls :func:`memlab.bench.workbench.bench`,
    whose signature and documentation it shows (``help``, ``inspect.signature``, Jupyter's
    ``?``)."""

    def __call__(self, *args, **kwargs):
        from memlab.bench.workbench import bench as run

        return run(*args, **kwargs)

    @property
    def __signature__(self):
        import inspect

        from memlab.bench.workbench import bench as run

        return inspect.signature(run)

    @property
    def __doc__(self):  # noqa: D401 (help(memlab.bench) shows the function first)
        import inspect

        from memlab.bench.workbench import bench as run

        return (f"memlab.bench{inspect.signature(run)}\n\n{inspect.getdoc(run)}\n\n"
                f"The package memlab.bench: {_DOC}")


sys.modules[__name__].__class__ = _CallablePackage
