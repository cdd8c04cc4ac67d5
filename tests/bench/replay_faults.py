"""A replay worker's task that dies (os._exit, as a killed process does) on the conversation
named ``dies``: imported by the spawned worker processes of tests/bench/test_parallel_replay.py."""

from __future__ import annotations

import os

from memlab.bench.parallel import run_conversation


def die_on_dies(conv, *args):
    if conv.conversation_id == "dies":
        os._exit(9)
    return run_conversation(conv, *args)
