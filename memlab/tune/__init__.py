"""Tuning: score many configurations on one replay's cached raw signals (sweeps, learned fusion,
k-fold and cross-dataset scores). Sits above :mod:`memlab.bench`, below the CLI."""
