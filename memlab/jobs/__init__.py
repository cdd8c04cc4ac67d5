"""Fold jobs (reverie §11.4): a queue in the store's ``memory_jobs`` table with leases, a worker,
and the job kinds — ``extract_atoms``, ``evidence_check``, ``cleanup_usage``, ``reembed`` and
``consolidate`` (the Familiars consolidator, :mod:`memlab.lifecycle.consolidate`).

From Python::

    from memlab.jobs import Worker
    worker = store.worker()                     # store = memlab.open_store(...)
    worker.enqueue("extract_atoms")
    report = worker.run(progress=True)          # until no job is ready
    worker.to_frame()                           # the jobs as a DataFrame

From the shell: ``memlab jobs enqueue|run|list|status STORE``. Conversation compression (§11.5,
:mod:`memlab.jobs.compress`): ``store.compress_history(turns)``, ``store.recall_summaries(query)``.
"""

from __future__ import annotations

from . import atoms, evidence, maintenance  # noqa: F401  (register the built-in kinds)
from .compress import ChatTurn, SummaryHit, extractive_summary, llm_summariser, recall_summaries
from .atoms import Atom, StoredAtom, extract_atoms, stored_atoms
from .evidence import Contradiction, contradictions
from .kinds import JobContext, JobKind, Outcome, enqueue, get_kind, kinds, register
from .queue import JOB_STATES, Job, Lease
from .worker import RunReport, Worker

__all__ = ["Atom", "ChatTurn", "Contradiction", "SummaryHit", "JOB_STATES", "Job", "JobContext", "JobKind", "Lease",
           "Outcome", "RunReport", "StoredAtom", "Worker", "contradictions", "enqueue",
           "extract_atoms", "extractive_summary", "get_kind", "kinds",
           "llm_summariser", "recall_summaries", "register",
           "stored_atoms"]
