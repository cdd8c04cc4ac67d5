#!/usr/bin/env bash
# Two `memlab sweep` workers on one Optuna study in a local PostgreSQL (issue 8).
#
# Starts a throw-away PostgreSQL cluster under a temporary folder (port chosen free, 127.0.0.1
# only, removed at exit), warms memlab's caches with one trial, then times
#   one worker:  memlab sweep ... --trials N                    (study "one")
#   two workers: two memlab sweep ... --trials N, concurrently  (study "two", the second joins
#                once the study holds a trial)
# and prints finished trials and trials/s of each, then checks study "two": every trial was run
# by one worker, and no configuration was run twice. Not a test: a measurement to report.
#
#   bash benchmarks/sweep_distributed.sh                 # memlab-lifelog, reverie space, N=60
#   DATASET=locomo SPACE=hybrid_rrf TRIALS=100 PYTHON=.venv/bin/python bash benchmarks/...
#   RUN_AS=memlabpg PYTHON=.venv/bin/python bash benchmarks/sweep_distributed.sh   # as root
#
# Environment: PYTHON (default python3), DATASET, SPACE, TRIALS; PG_BIN, the folder of
# PostgreSQL's binaries (default: PATH, else `pg_config --bindir`, else the newest
# /usr/lib/postgresql/*/bin, where Debian/Ubuntu put them); CACHE_DIR, memlab's embedding and
# feature caches (default <repo>/.cache/memlab; must be writable by the user that runs this);
# RUN_AS, a user to re-run this script as when started by root (PostgreSQL refuses root; the user
# must be able to read the repository and the Python, and the environment is passed on).
#
# Needs PostgreSQL's server binaries (initdb, pg_ctl, postgres) and psql, SQLAlchemy's psycopg2
# driver in the Python that runs memlab (the `distributed` extra), and an ordinary user.
# Exit 2 with what to install or set when one is missing.
#
# Separate commands on one study share its --seed (a study is bound to its sampler and seed:
# another seed is refused) and seed their samplers from (seed, worker, trials already in the
# study): two commands that open an empty study at the same moment would draw the same
# configurations, so the second (another machine, in real use) starts once the study holds a
# trial. Each command's budget is N minus the trials finished when it starts, so both run about
# N (2N in all): trials/s compares equal work per worker.
# The 1-minute load average (/proc/loadavg) is printed at each phase's start and end: on a
# shared machine the wall-clock figures mean little without it. The CPU seconds per trial (user +
# system of the sweep processes, from bash's `times`; PostgreSQL's own server not counted) do not
# depend on the load.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" = 0 ]; then
  if [ -z "${RUN_AS:-}" ]; then
    echo "PostgreSQL refuses to run as root: run this script as an ordinary user, or set" \
         "RUN_AS=<user> to have it re-run itself as that user (e.g. useradd -m memlabpg)." >&2
    exit 2
  fi
  if ! id -u "$RUN_AS" >/dev/null 2>&1 || [ "$(id -u "$RUN_AS")" = 0 ]; then
    echo "RUN_AS=$RUN_AS is not an existing non-root user (create one: useradd -m $RUN_AS)." >&2
    exit 2
  fi
  # runuser keeps the environment but sets HOME, USER and LOGNAME to the user's.
  exec runuser -u "$RUN_AS" -- bash "$ROOT/benchmarks/sweep_distributed.sh" "$@"
fi

PY=${PYTHON:-python3}
DATASET=${DATASET:-memlab-lifelog}
SPACE=${SPACE:-reverie}
TRIALS=${TRIALS:-60}
CACHE_DIR=${CACHE_DIR:-$ROOT/.cache/memlab}

if [ -z "${PG_BIN:-}" ]; then
  if command -v initdb >/dev/null; then PG_BIN=$(dirname "$(command -v initdb)")
  elif command -v pg_config >/dev/null; then PG_BIN=$(pg_config --bindir)
  else PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  fi
fi
missing=()
for b in initdb pg_ctl postgres psql; do
  if [ -x "$PG_BIN/$b" ]; then continue; fi
  command -v "$b" >/dev/null || missing+=("$b")
done
if ((${#missing[@]})); then
  echo "PostgreSQL binaries missing (looked in ${PG_BIN:-PATH} and on PATH): ${missing[*]}." \
       "Install PostgreSQL from the system's package manager (Debian/Ubuntu: sudo apt-get" \
       "install postgresql; Fedora: sudo dnf install postgresql-server; macOS: brew install" \
       "postgresql), then rerun, with PG_BIN=<its bin folder> if it is not found." >&2
  exit 2
fi
pg() { local b=$1; shift; if [ -x "$PG_BIN/$b" ]; then "$PG_BIN/$b" "$@"; else "$b" "$@"; fi; }
if ! "$PY" -c "import psycopg2" 2>/dev/null; then
  echo "Optuna reaches PostgreSQL through SQLAlchemy's psycopg2 driver, which $PY lacks:" \
       "install memlab's distributed extra ($PY -m pip install -e '.[distributed]'," \
       "i.e. psycopg2-binary)." >&2
  exit 2
fi
if ! mkdir -p "$CACHE_DIR" 2>/dev/null || [ ! -w "$CACHE_DIR" ]; then
  echo "memlab's cache folder $CACHE_DIR is not writable by $(id -un): set CACHE_DIR to one" \
       "that is." >&2
  exit 2
fi

TMP=$(mktemp -d)
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pg initdb -D "$TMP/db" -U memlab --auth=trust >"$TMP/initdb.log"
pg pg_ctl -D "$TMP/db" -o "-p $PORT -k $TMP -h 127.0.0.1" -l "$TMP/pg.log" -w start >/dev/null
trap 'pg pg_ctl -D "$TMP/db" -m fast -w stop >/dev/null || true; rm -rf "$TMP"' EXIT
pg psql -q -h 127.0.0.1 -p "$PORT" -U memlab -d postgres -c "CREATE DATABASE optuna"
URL="postgresql+psycopg2://memlab@127.0.0.1:$PORT/optuna"

cd "$ROOT"
sweep() { PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m memlab.cli sweep -d "$DATASET" \
  --space "$SPACE" --sampler random -q --no-track --storage "$URL" --cache-dir "$CACHE_DIR" \
  --out-dir "$TMP/out" "$@"; }
count() { "$PY" - "$URL" "$1" <<'EOF'
import sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
s = optuna.load_study(study_name=sys.argv[2], storage=sys.argv[1])
print(sum(t.state.name == "COMPLETE" for t in s.trials))
EOF
}

echo "warming the caches (replay, embeddings): one trial" >&2
sweep --study warm --trials 1 >/dev/null
load() { cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo nan; }
# CPU seconds (user + system) of this shell's finished children: `times` must run in this shell
# (a subshell starts from zero), so it writes a file that cpu_read then parses.
cpu_now() { times >"$TMP/times"; }
cpu_read() { tail -n 1 "$TMP/times" | tr 'ms' '  ' | awk '{print $1 * 60 + $2 + $3 * 60 + $4}'; }
cpu_now; c0=$(cpu_read)
l0=$(load); t0=$(date +%s.%N)
sweep --study one --trials "$TRIALS" >"$TMP/one.txt"
l1=$(load); t1=$(date +%s.%N); cpu_now; c1=$(cpu_read)
sweep --study two --trials "$TRIALS" >"$TMP/two-a.txt" & a=$!
# the second worker joins when study "two" holds a trial (or the first command has ended)
"$PY" - "$URL" "$a" <<'EOF'
import os, sys, time, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
url, pid = sys.argv[1], int(sys.argv[2])
while os.path.exists(f"/proc/{pid}"):
    try:
        if optuna.load_study(study_name="two", storage=url).get_trials(deepcopy=False):
            break
    except KeyError:            # not created yet
        pass
    time.sleep(0.2)
EOF
sweep --study two --trials "$TRIALS" >"$TMP/two-b.txt" & b=$!
wait "$a" "$b"
l2=$(load); t2=$(date +%s.%N); cpu_now; c2=$(cpu_read)
n1=$(count one)
n2=$(count two)
"$PY" - "$n1" "$t0" "$t1" "$n2" "$t2" "$DATASET" "$SPACE" "$l0" "$l1" "$l2" "$c0" "$c1" "$c2" <<'EOF'
import json, os, sys
n1, t0, t1, n2, t2 = int(sys.argv[1]), *map(float, sys.argv[2:4]), int(sys.argv[4]), float(sys.argv[5])
l0, l1, l2, c0, c1, c2 = map(float, sys.argv[8:14])
rows = {"one worker": (n1, t1 - t0, l0, l1, c1 - c0), "two workers": (n2, t2 - t1, l1, l2, c2 - c1)}
print(f"{sys.argv[6]}, space {sys.argv[7]}, PostgreSQL storage, {os.cpu_count()} CPUs "
      "(wall time includes each command's start-up)")
print(f"{'':<12} {'trials':>7} {'seconds':>8} {'trials/s':>9} {'CPU s/trial':>12} {'load start-end':>15}")
for k, (n, s, a, b, c) in rows.items():
    print(f"{k:<12} {n:>7} {s:>8.1f} {n / s:>9.2f} {c / n:>12.3f} {a:>7.2f}-{b:<7.2f}")
print(json.dumps({k: {"trials": n, "seconds": round(s, 2), "trials_per_s": round(n / s, 3),
                      "cpu_s_per_trial": round(c / n, 4), "load_1min": [a, b]}
                  for k, (n, s, a, b, c) in rows.items()}))
EOF
# Study "two": which worker ran each trial (memlab.worker), and whether any configuration ran twice.
"$PY" - "$URL" <<'EOF'
import collections, json, sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
s = optuna.load_study(study_name="two", storage=sys.argv[1])
trials = s.get_trials(deepcopy=False)
states = collections.Counter(t.state.name for t in trials)
done = [t for t in trials if t.state.name == "COMPLETE"]
by_worker = collections.Counter(t.user_attrs.get("memlab.worker", "?") for t in done)
numbers = [t.number for t in trials]
configs = collections.Counter(json.dumps(t.params, sort_keys=True) for t in done)
twice = {c: n for c, n in configs.items() if n > 1}
print(f"study two: {len(trials)} trials {dict(states)}; finished per worker "
      f"{dict(by_worker)}; trial numbers distinct: {len(set(numbers)) == len(numbers)}; "
      f"configurations run more than once: {len(twice)}")
for c, n in twice.items():
    print(f"  {n}x {c}")
EOF
