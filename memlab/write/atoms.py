"""Typed atoms of a text (reverie §11.4 ``extract_atoms``): the pure rules, without the job.

A text is cut into clauses (``jobs.atom_clause_split``); a clause matching any rule of a kind
(``jobs.atom_<kind>``, regular expressions, Chinese and English by default) is one atom of that
kind, so one clause can give atoms of several kinds and a text several atoms. The fold job that
stores them (:mod:`memlab.jobs.atoms`) and the expanded keys written with every memory
(:mod:`memlab.write.keys`) both read them from here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memlab.config import JobsConfig
from memlab.store.migrations import ATOM_KINDS

__all__ = ["Atom", "clauses", "extract_atoms"]


@dataclass(frozen=True)
class Atom:
    """One typed atom: its ``kind``, the clause (``text``) and the ``rule`` that matched."""

    kind: str
    text: str
    rule: str


@functools.lru_cache(maxsize=16)
def _compiled(cfg: JobsConfig) -> tuple[re.Pattern[str], tuple[tuple[str, tuple[re.Pattern[str],
                                                                              ...]], ...]]:
    rules = tuple((kind, tuple(re.compile(r) for r in getattr(cfg, f"atom_{kind}")))
                  for kind in ATOM_KINDS)
    return re.compile(cfg.atom_clause_split), rules


def clauses(text: str, cfg: JobsConfig) -> list[str]:
    """The non-blank clauses of ``text`` (cut at ``jobs.atom_clause_split``), stripped."""
    split, _ = _compiled(cfg)
    return [c.strip() for c in split.split(text) if c and c.strip()]


def extract_atoms(text: str, cfg: JobsConfig) -> list[Atom]:
    """The atoms of ``text``, in clause order, kinds in the order of ``ATOM_KINDS``; each (kind,
    clause) once, with the first rule of the kind that matched."""
    _, rules = _compiled(cfg)
    out: dict[tuple[str, str], Atom] = {}
    for clause in clauses(text, cfg):
        for kind, patterns in rules:
            if (kind, clause) in out:
                continue
            for rx in patterns:
                if rx.search(clause):
                    out[kind, clause] = Atom(kind, clause, rx.pattern)
                    break
    return list(out.values())
