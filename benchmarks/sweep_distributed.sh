#!/usr/bin/env bash
# Two `memlab sweep` workers on one Optuna study in a local PostgreSQL (issue 8).
#
# Starts a throw-away PostgreSQL cluster under a temporary folder (port chosen free, 127.0.0.1
# only, removed at exit), warms memlab's caches with one trial, then times
#   one worker:  memlab sweep ... --trials N                    (study "one")
#   two workers: two memlab sweep ... --trials N, concurrently  (study "two", seeds 0 and 1)
# and prints finished trials and trials/s of each. Not a test: a measurement to report.
#
#   bash benchmarks/sweep_distributed.sh                 # memlab-lifelog, reverie space, N=60
#   DATASET=locomo SPACE=hybrid_rrf TRIALS=100 PYTHON=.venv/bin/python bash benchmarks/...
#
# Needs PostgreSQL's server binaries (initdb, pg_ctl, postgres) and psql, SQLAlchemy's psycopg2
# driver in the Python that runs memlab, and an ordinary user (PostgreSQL refuses root).
# Exit 2 with what to install when one is missing.
#
# Separate commands on one study need distinct --seed values: each seeds its sampler from
# (seed, worker, trials already in the study), and two commands started together see the same
# study. Each aims at N finished trials, so together they may finish up to N+1.
set -euo pipefail

PY=${PYTHON:-python3}
DATASET=${DATASET:-memlab-lifelog}
SPACE=${SPACE:-reverie}
TRIALS=${TRIALS:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

missing=()
for b in initdb pg_ctl postgres psql; do command -v "$b" >/dev/null || missing+=("$b"); done
if ((${#missing[@]})); then
  echo "PostgreSQL binaries missing: ${missing[*]}. Install PostgreSQL from the system's package" \
       "manager (Debian/Ubuntu: sudo apt-get install postgresql; Fedora: sudo dnf install" \
       "postgresql-server; macOS: brew install postgresql), put its bin folder on PATH, rerun." >&2
  exit 2
fi
if ! "$PY" -c "import psycopg2" 2>/dev/null; then
  echo "Optuna reaches PostgreSQL through SQLAlchemy's psycopg2 driver, which $PY lacks:" \
       "$PY -m pip install psycopg2-binary" >&2
  exit 2
fi
if [ "$(id -u)" = 0 ]; then
  echo "PostgreSQL refuses to run as root: run this script as an ordinary user." >&2
  exit 2
fi

TMP=$(mktemp -d)
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
initdb -D "$TMP/db" -U memlab --auth=trust >"$TMP/initdb.log"
pg_ctl -D "$TMP/db" -o "-p $PORT -k $TMP -h 127.0.0.1" -l "$TMP/pg.log" -w start >/dev/null
trap 'pg_ctl -D "$TMP/db" -m fast -w stop >/dev/null || true; rm -rf "$TMP"' EXIT
psql -q -h 127.0.0.1 -p "$PORT" -U memlab -d postgres -c "CREATE DATABASE optuna"
URL="postgresql+psycopg2://memlab@127.0.0.1:$PORT/optuna"

cd "$ROOT"
sweep() { PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m memlab.cli sweep -d "$DATASET" \
  --space "$SPACE" --sampler random -q --no-track --storage "$URL" --out-dir "$TMP/out" "$@"; }
count() { "$PY" - "$URL" "$1" <<'EOF'
import sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
s = optuna.load_study(study_name=sys.argv[2], storage=sys.argv[1])
print(sum(t.state.name == "COMPLETE" for t in s.trials))
EOF
}

echo "warming the caches (replay, embeddings): one trial" >&2
sweep --study warm --trials 1 >/dev/null
t0=$(date +%s.%N)
sweep --study one --trials "$TRIALS" >"$TMP/one.txt"
t1=$(date +%s.%N)
sweep --study two --trials "$TRIALS" --seed 0 >"$TMP/two-a.txt" & a=$!
sweep --study two --trials "$TRIALS" --seed 1 >"$TMP/two-b.txt" & b=$!
wait "$a" "$b"
t2=$(date +%s.%N)
n1=$(count one)
n2=$(count two)
"$PY" - "$n1" "$t0" "$t1" "$n2" "$t2" "$DATASET" "$SPACE" <<'EOF'
import json, sys
n1, t0, t1, n2, t2 = int(sys.argv[1]), *map(float, sys.argv[2:4]), int(sys.argv[4]), float(sys.argv[5])
rows = {"one worker": (n1, t1 - t0), "two workers": (n2, t2 - t1)}
print(f"{sys.argv[6]}, space {sys.argv[7]}, PostgreSQL storage (wall time includes each command's start-up)")
print(f"{'':<12} {'trials':>7} {'seconds':>8} {'trials/s':>9}")
for k, (n, s) in rows.items():
    print(f"{k:<12} {n:>7} {s:>8.1f} {n / s:>9.2f}")
print(json.dumps({k: {"trials": n, "seconds": round(s, 2), "trials_per_s": round(n / s, 3)}
                  for k, (n, s) in rows.items()}))
EOF
