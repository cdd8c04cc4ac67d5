"""``memlab ...``: config, where, add, recall, store (check, rebuild), card (sync), history, pin, unpin,
contradictions, datasets, bench, explain-misses, sweep, fit, jobs, status, serve."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import List, Optional

import typer

from memlab.cliutil import (agent_option, cache_dir_option, config_option, dataset_option, fail,
                            failing, json_flag, json_out_option, load_cli_config, loader_option,
                            loader_options, path_option, quiet_option, run_overrides,
                            set_option, store_argument, user_option, when)
from memlab.config import MemlabConfig, describe, load_config, parse_assignments
from memlab.errors import MemlabError

app = typer.Typer(help="memlab: long-term memory for conversational agents, measured.", rich_markup_mode="markdown",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
config_app = typer.Typer(help="Show or validate the configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")
store_app = typer.Typer(help="Check a store file, or rebuild its vector table.",
                        no_args_is_help=True)
app.add_typer(store_app, name="store")
card_app = typer.Typer(help="Sync a character card into a store's permanent layer.",
                       no_args_is_help=True)
app.add_typer(card_app, name="card")


@config_app.command("show")
def config_show(
    config: Optional[Path] = config_option(),
    fmt: str = typer.Option("table", "--format", help="table | yaml | json | flat"),
    section: Optional[str] = typer.Option(None, help="Only this section."),
) -> None:
    """Every field: value, default, range, stage and description; a field whose stage differs in
    a writer-mode benchmark replay (bench.write_mode writer) names that stage (column writer);
    a field no code reads yet says which issue plans it (column planned)."""
    cfg = load_cli_config(config, None)
    if fmt == "yaml":
        typer.echo(cfg.to_yaml())
        return
    if fmt == "flat":
        for k, v in cfg.to_flat().items():
            typer.echo(f"{k}={json.dumps(v, ensure_ascii=False)}")
        return
    nested = cfg.to_dict()
    rows = [dict(r, value=nested[r["key"].split(".")[0]][r["key"].split(".")[1]])
            for r in describe(include_planned=True)
            if section is None or r["key"].startswith(section + ".")]
    if fmt == "json":
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    def short(v: object) -> str:
        text = json.dumps(v, ensure_ascii=False)
        return text if len(text) <= 24 else text[:21] + "..."

    typer.echo(f"{'key':<40} {'value':<24} {'default':<24} {'range':<18} {'stage':<10} "
               f"{'writer':<7} {'planned':<9} description")
    for r in rows:
        mark = "" if r["value"] == r["default"] else "*"
        writer = r["writer_stage"] if r["writer_stage"] != r["stage"] else "-"
        typer.echo(f"{r['key']:<40} {short(r['value']) + mark:<24} {short(r['default']):<24} "
                   f"{r['range']:<18} {r['stage']:<10} {writer:<7} {r['planned'] or '-':<9} "
                   f"{r['description']}")


@config_app.command("validate")
def config_validate(path: Path) -> None:
    """Validate a YAML config file: unknown keys and out-of-range values are named."""
    with failing():
        cfg = MemlabConfig.from_yaml(path)
    got, default = cfg.to_dict(), MemlabConfig().to_dict()
    changed = {f"{s}.{k}": v for s, sec in got.items() for k, v in sec.items()
               if v != default[s][k]}
    planned = {r["key"]: r["planned"] for r in describe(include_planned=True) if r["planned"]}
    typer.echo(f"ok: {path} ({len(changed)} field(s) differ from the defaults)")
    for k, v in changed.items():
        note = f"  (planned, {planned[k]}: no behaviour yet)" if k in planned else ""
        typer.echo(f"  {k} = {json.dumps(v, ensure_ascii=False)}{note}")


@app.command("where")
def where_cmd(
    config: Optional[Path] = config_option("A YAML config: where its bench.cache_dir is."),
    set_: Optional[List[str]] = set_option(),
    as_json: bool = json_flag("Print JSON."),
) -> None:
    """Where memlab keeps what benchmarks and sweeps write: the memlab home (MEMLAB_HOME, else
    the project root found from the working folder: the nearest folder up holding .memlab,
    pyproject.toml or .git, else the working folder), its caches, results, sweeps and MLflow
    database, and the command that opens the MLflow UI on it."""
    from memlab.home import find_home, under_home

    with failing():
        home = find_home()
        cfg = load_config(config, overrides=parse_assignments(set_))
    info = home.to_dict(cache_dir=under_home(cfg.bench.cache_dir, home))
    info["mlflow_ui"] = f"mlflow ui --backend-store-uri {info['tracking_uri']}"
    if as_json:
        typer.echo(json.dumps(info, ensure_ascii=False, indent=1))
        return
    rows = [("home", f"{info['home']}   ({home.why()})"),
            ("caches", f"{info['cache_dir']}   (bench.cache_dir)"),
            ("results", f"{info['results_dir']}   (memlab bench --out-dir)"),
            ("sweeps", f"{info['sweeps_dir']}   (memlab sweep --out-dir)"),
            ("MLflow", info["tracking_uri"]), ("MLflow UI", info["mlflow_ui"])]
    for name, value in rows:
        typer.echo(f"{name:<10} {value}")


@app.command("lab", context_settings={"allow_extra_args": True,
                                      "ignore_unknown_options": True})
def lab_cmd(
    ctx: typer.Context,
    notebooks: Optional[Path] = typer.Option(None, "--notebooks", help="The notebooks folder "
                                             "(default: notebooks/ of the memlab home)."),
    port: Optional[int] = typer.Option(None, "--port", help="JupyterLab's port (default: "
                                       "JupyterLab's, 8888 or the next free one)."),
    no_browser: bool = typer.Option(False, "--no-browser", help="Do not open a browser; "
                                    "JupyterLab prints the URL with its token."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the command and the kernel, "
                                 "start nothing."),
) -> None:
    """Open JupyterLab on memlab's notebooks, with memlab's environment as the kernel (this
    Python, whatever else is on PATH). Needs the `lab` extra: pip install 'memlab[lab]'.
    Arguments after the options go to JupyterLab as given (`memlab lab -- --ServerApp.ip=0.0.0.0`)."""
    import os
    import subprocess

    from memlab.home import find_home
    from memlab.lab import check_installed, lab_command, missing_packages

    with failing():
        cmd = lab_command(home=find_home(), notebooks=notebooks, port=port,
                          no_browser=no_browser, extra=list(ctx.args))
    typer.echo(cmd.describe())
    if dry_run:
        missing = missing_packages()
        if missing:
            typer.echo(f"not installed: {', '.join(missing)} (pip install 'memlab[lab]')")
        return
    with failing():
        check_installed()
    env = {**os.environ, **cmd.env}
    sys.stdout.flush()
    if os.name == "posix":                       # JupyterLab takes this process over (Ctrl-C)
        os.execve(cmd.argv[0], cmd.argv, env)
    raise typer.Exit(subprocess.run(cmd.argv, env=env).returncode)  # pragma: no cover


@app.command("add")
def add_cmd(
    store: Path = store_argument("The store file (created when missing)."),
    text: str = typer.Argument(..., help="The memory text."),
    importance: Optional[float] = typer.Option(None, help="In [0, 1]; default: §5 scorer."),
    layer: Optional[str] = typer.Option(None, help="permanent | long_term | short_term."),
    agent_id: Optional[str] = agent_option(), user_id: Optional[str] = user_option(),
    config: Optional[Path] = config_option(help=None),
    set_: Optional[List[str]] = set_option("key=value overrides."),
) -> None:
    """Add one memory to a store file."""
    from memlab.api import open_store

    with failing():
        cfg = load_cli_config(config, set_)
        with open_store(store, config=cfg) as st:
            rec = st.add(text, importance=importance, layer=layer, agent_id=agent_id,
                         user_id=user_id)
    typer.echo(f"{rec.id}\t{rec.retention_layer}\timportance={rec.importance:.2f}")


@card_app.command("sync")
def card_sync(
    card: Path = typer.Argument(..., help="The character card (YAML or JSON)."),
    db: Path = typer.Option(..., "--db", help="The store file (created when missing)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the diff, write nothing."),
    agent_id: Optional[str] = agent_option(), user_id: Optional[str] = user_option(),
    config: Optional[Path] = config_option(help=None),
    set_: Optional[List[str]] = set_option("key=value overrides."),
) -> None:
    """Sync CARD into the permanent layer (§4.2): anchors by content hash, only what changed;
    users' memories are never touched. Prints the diff (- removed, + added)."""
    from memlab.api import open_store

    with failing():
        cfg = load_cli_config(config, set_)
        with open_store(db, config=cfg) as st:
            plan = st.sync_card(card, agent_id=agent_id, user_id=user_id, dry_run=dry_run)
    typer.echo(str(plan))


@app.command("recall")
def recall_cmd(
    store: Path = store_argument(),
    query: str = typer.Argument(...),
    k: Optional[int] = typer.Option(None, "-k", help="Memories to return."),
    explain: bool = typer.Option(False, "--explain", help="Show every score component."),
    prompt: bool = typer.Option(False, "--prompt", help="Print the prompt block."),
    agent_id: Optional[str] = agent_option(), user_id: Optional[str] = user_option(),
    config: Optional[Path] = config_option(help=None),
    set_: Optional[List[str]] = set_option("key=value overrides."),
) -> None:
    """Recall memories for a query (time: now)."""
    import pandas as pd

    from memlab.api import open_store

    if not store.exists():
        fail(f"{store}: no such store file")
    with failing():
        cfg = load_cli_config(config, set_)
        with open_store(store, config=cfg) as st:
            res = st.recall(query, k=k, agent_id=agent_id, user_id=user_id)
    for note in res.notes:
        typer.secho(f"note: {note}", fg=typer.colors.YELLOW, err=True)
    if not len(res):
        typer.echo(f"no memories: {res.empty_reason}")
        return
    if prompt:
        typer.echo(res.to_prompt())
        return
    frame = res.to_frame()
    if not explain:
        frame = frame[["rank", "score", "id", "text"]]
    with pd.option_context("display.max_columns", None, "display.width", 200,
                           "display.max_colwidth", 60, "display.float_format", "{:.4f}".format):
        typer.echo(frame.to_string(index=False))


@store_app.command("check")
def store_check(
    store: Path = store_argument("The store file (opened read-only)."),
    full: bool = typer.Option(False, "--full", help="PRAGMA integrity_check (slower) instead of "
                              "quick_check, and the contents of every vector instead of "
                              "store.vector_sample of them."),
    as_json: bool = json_flag("The report as JSON."),
    config: Optional[Path] = config_option(help=None),
    set_: Optional[List[str]] = set_option("key=value overrides."),
) -> None:
    """Integrity, schema version, records by layer and status, pending embeddings, vectors
    against embedded memories per model version and their contents, the change log. Writes
    nothing. Exit code 0 when
    healthy, 1 when a problem is found, 2 when the file cannot be opened."""
    from memlab.store.checkup import check_store

    if not store.exists():
        fail(f"{store}: no such store file")
    with failing():
        cfg = load_cli_config(config, set_)
        report = check_store(store, full=full, busy_timeout_ms=cfg.store.busy_timeout_ms,
                             vector_sample=cfg.store.vector_sample)
    typer.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=1) if as_json
               else "\n".join(report.lines()))
    raise typer.Exit(0 if report.healthy else 1)


@store_app.command("rebuild")
def store_rebuild(
    store: Path = store_argument(),
    as_json: bool = json_flag("The report as JSON."),
    config: Optional[Path] = config_option("Names the embedder."),
    set_: Optional[List[str]] = set_option("key=value overrides."),
) -> None:
    """Rebuild the embedder's vector table from the records through the embedding cache,
    embedding what the cache lacks; report the counts."""
    from dataclasses import asdict

    from memlab.embed import make_embedder
    from memlab.store.health import rebuild_store

    if not store.exists():
        fail(f"{store}: no such store file")
    with failing():
        cfg = load_cli_config(config, set_)
        report = rebuild_store(store, config=cfg, embedder=make_embedder(cfg))
    typer.echo(json.dumps(asdict(report), ensure_ascii=False, indent=1) if as_json
               else "\n".join(report.lines()))


# -- lifecycle governance: facts over time, pins (memlab/write/facts.py, pins.py) -------------------
def _governed(store: Path, config: Optional[Path], sets: list[str] | None):
    """The store opened without an embedder (these commands read and write records only)."""
    from memlab.api import open_store

    if not store.exists():
        raise MemlabError(f"{store}: no such store file")
    return open_store(store, config=load_cli_config(config, sets), load_embedder=False)


@app.command("history")
def history_cmd(
    store: Path = store_argument(),
    memory_id: str = typer.Argument(..., help="Any revision's id."),
    agent_id: Optional[str] = agent_option(), user_id: Optional[str] = user_option(),
    as_json: bool = json_flag("The revisions as JSON."),
    config: Optional[Path] = config_option(help=None),
    set_: Optional[List[str]] = set_option("key=value overrides."),
) -> None:
    """Every revision of the fact a memory states, oldest first (fact_key, fact_revision,
    lifecycle state: recall sees the active one only)."""
    with failing():
        with _governed(store, config, set_) as st:
            chain = st.history(memory_id, agent_id=agent_id, user_id=user_id)
    rows = [{"revision": r.fact_revision, "id": r.id, "state": r.lifecycle_state,
             "pinned": r.pinned, "written": when(r.timestamp), "fact_key": r.fact_key,
             "supersedes": r.supersedes or "", "text": r.text} for r in chain]
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    for r in rows:
        typer.echo(f"r{r['revision']}\t{r['state']:<10}\t{'pinned' if r['pinned'] else '':<6}\t"
                   f"{r['written']}\t{r['id']}\t{r['fact_key']}\t{r['text']}")


@app.command("pin")
def pin_cmd(
    store: Path = store_argument(),
    memory_id: str = typer.Argument(...),
    agent_id: Optional[str] = agent_option(), user_id: Optional[str] = user_option(),
    config: Optional[Path] = config_option(help=None),
    set_: Optional[List[str]] = set_option("key=value overrides."),
) -> None:
    """Pin a memory: never forgotten, never consolidated; at most governance.pins_max per
    agent and user."""
    with failing():
        with _governed(store, config, set_) as st:
            st.pin(memory_id, agent_id=agent_id, user_id=user_id)
            n = len(st.pinned(agent_id=agent_id, user_id=user_id))
            cap = st.config.governance.pins_max
    typer.echo(f"pinned {memory_id} ({n} of {cap} pins)")


@app.command("unpin")
def unpin_cmd(
    store: Path = store_argument(),
    memory_id: str = typer.Argument(...),
    agent_id: Optional[str] = agent_option(), user_id: Optional[str] = user_option(),
    config: Optional[Path] = config_option(help=None),
    set_: Optional[List[str]] = set_option("key=value overrides."),
) -> None:
    """Unpin a memory."""
    with failing():
        with _governed(store, config, set_) as st:
            st.unpin(memory_id, agent_id=agent_id, user_id=user_id)
    typer.echo(f"unpinned {memory_id}")


@app.command("fit")
def fit_cmd(
    dataset: str = dataset_option("A registered name or a canonical folder."),
    path: Optional[str] = path_option(),
    option: Optional[List[str]] = loader_option("Dataset loader option key=value "
                                                "(e.g. 'categories=[1,2,3,4]')."),
    preset: str = typer.Option("reverie", "--preset", help="The preset (or YAML) whose weights "
                               "are learned; its scorer must be reverie (or reverie_plus: its terms too)."),
    set_: Optional[List[str]] = set_option(),
    model: str = typer.Option("linear", "--model", help="linear: reverie's weights, written as "
                              "a config YAML; hgb: a gradient-boosting model over every raw "
                              "signal, written as a skops file for fusion.scorer 'learned'; "
                              "lambdarank: a LightGBM ranker over every raw signal and the "
                              "gates (memlab[rank]), scored with fusion.learned_floor false."),
    method: str = typer.Option("pairwise", "--method", help="pairwise | pointwise logistic "
                               "regression (linear model)."),
    folds: Optional[int] = typer.Option(None, "--folds", help="K folds by conversation: "
                                        "held-out metric of defaults, linear and hgb, and the "
                                        "permutation importance of hgb."),
    metric: str = typer.Option("ndcg@10", "--metric", help="Metric of the fold table and the "
                               "permutation importance."),
    repeats: int = typer.Option(1, "--repeats", help="Shuffles per column (importance)."),
    no_importance: bool = typer.Option(False, "--no-importance", help="Skip the permutation "
                                       "importance (--folds)."),
    seed: int = typer.Option(0, "--seed", help="Folds, pair sampling and the model."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the model fitted on every "
                                       "question: a config YAML (linear) or a skops file (hgb)."),
    figure: Optional[Path] = typer.Option(None, "--figure", help="Permutation importance bar "
                                          "chart (PNG; --folds)."),
    cache_dir: Optional[Path] = cache_dir_option(),
    json_out: Optional[Path] = json_out_option(),
    quiet: bool = quiet_option(),
) -> None:
    """Learn the fused score's weights from a dataset's cached raw signals (scikit-learn)."""
    import pandas as pd

    from memlab.bench.datasets import registry
    from memlab.bench.environment import environment, environment_line
    from memlab.bench.run import replay_cached, resolve_preset
    from memlab.embed import make_embedder
    from memlab.recall.learned import save_model
    from memlab.tune import fit as F
    from memlab.tune.crossfit import crossfit, importance_figure
    from memlab.tune.evaluate import per_query

    report: dict = {"dataset": dataset, "preset": preset, "model": model, "method": method}
    with failing():
        if model not in ("linear", "hgb", "lambdarank"):
            raise MemlabError(f"--model: must be linear, hgb or lambdarank (got {model!r})")
        overrides = run_overrides(set_, cache_dir, False)
        cfg = load_config(resolve_preset(preset)[1], overrides=overrides)
        ds = registry.load(dataset, path=path, **loader_options(option))
        embedder = make_embedder(cfg) if cfg.recall.use_dense else None
        rep = replay_cached(ds, cfg, embedder=embedder, progress=not quiet)
        report["questions"] = int(len(rep.questions))
        report["environment"] = env = environment(embedder=embedder,
                                                  threads=cfg.embedding.threads)
        header = (f"memlab fit --dataset {dataset} --preset {preset} --model {model} --method "
                  f"{method} --seed {seed}\nlearned on {ds.card.name} {ds.card.version} "
                  f"({ds.content_hash()[:12]}), every question\n{environment_line(env)}")
        if model == "linear":
            lin = F.fit_linear(F.build_design(rep, cfg), cfg, method=method, seed=seed)
            pd.set_option("display.width", 160)
            typer.echo(lin.table(cfg).to_string(float_format=lambda v: f"{v:.4f}"))
            for feat, note in lin.notes.items():
                typer.echo(f"  {feat}: {note}")
            ins = {n: float(per_query(rep, c)[metric].mean())
                   for n, c in (("defaults", cfg), ("linear", lin.config))}
            typer.echo(f"in-sample {metric} (fitted on these questions): " +
                       ", ".join(f"{k} {v:.4f}" for k, v in ins.items()))
            report.update(weights=lin.weights, notes=lin.notes, counts=lin.counts,
                          in_sample=ins, scale=lin.scale)
            if out is not None:
                F.write_yaml(lin, out, header=header)
        elif model == "lambdarank":
            from memlab.tune.rank import Part, fit_model

            booster, feats, counts = fit_model([Part(ds.card.name, rep, cfg)], seed=seed)
            report["counts"] = counts
            typer.echo(f"lambdarank: {counts['groups_used']} questions, {counts['rows_used']} "
                       f"rows, {len(feats)} columns, {counts['best_iteration']} trees")
            if out is not None:
                save_model(booster, out, features=feats, trained=counts, kind="lambdarank",
                           config=cfg.to_flat(),
                           dataset={"name": ds.card.name, "version": ds.card.version,
                                    "content_hash": ds.content_hash()}, environment=env)
                typer.echo(f"score with: --set fusion.scorer=learned --set "
                           f"fusion.learned_model={out} --set fusion.learned_floor=false")
        else:
            hgb, feats, counts = F.fit_hgb(rep, cfg, seed=seed)
            report["counts"] = counts
            if out is not None:
                save_model(hgb, out, features=feats, trained=counts,
                           dataset={"name": ds.card.name, "version": ds.card.version,
                                    "content_hash": ds.content_hash()}, environment=env)
        if out is not None:
            report["out"] = str(out)
            typer.echo(f"wrote {out}")
        if folds is not None:
            cv = crossfit(rep, cfg, k=folds, seed=seed, method=method, metric=metric,
                          importance=not no_importance, repeats=repeats)
            summ = cv.summary()
            if model == "lambdarank":
                from memlab.tune.folds import conversation_folds
                from memlab.tune.heldout import Dev, Spec, kfold

                base = cv.per_query["defaults"]
                dev = Dev(rep, cfg, conversation_folds(base["conversation_id"], folds,
                                                       seed=seed), base.index)
                ranked = kfold({ds.card.name: dev}, Spec("lambdarank", joint=False),
                               seed=seed)[ds.card.name]
                cv.per_query["lambdarank"] = ranked
                cv.scores.loc["lambdarank"] = [float(ranked.reindex(f.test)[metric].mean())
                                               for f in dev.folds]
                summ = cv.summary()
            typer.echo(f"\n{folds}-fold held-out {metric} (folds by conversation)")
            typer.echo(summ.to_string(float_format=lambda v: f"{v:.4f}"))
            report["folds"] = {"k": folds, "metric": metric,
                               "scores": {m: [round(float(v), 6) for v in row]
                                          for m, row in cv.scores.iterrows()},
                               "summary": summ.round(6).to_dict(orient="index"),
                               "weights": cv.weights.round(6).to_dict(),
                               "counts": cv.counts}
            imp = cv.importance_summary()
            if imp is not None:
                typer.echo(f"\npermutation importance of hgb (drop of held-out {metric})")
                typer.echo(imp.head(12).to_string(float_format=lambda v: f"{v:.4f}"))
                report["folds"]["importance"] = imp.round(6).to_dict(orient="index")
                if figure is not None:
                    from memlab.bench.plots import save

                    save(importance_figure(imp, title=f"{ds.card.name}: hgb, held-out {metric}"),
                         figure)
                    typer.echo(f"wrote {figure}")
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report, ensure_ascii=False, indent=1, default=str),
                            encoding="utf-8")
        typer.echo(f"wrote {json_out}")


def _mount() -> None:
    from memlab.bench.cli import bench
    from memlab.bench.datasets.cli import datasets_app
    from memlab.bench.misses_cli import explain_misses_cmd
    from memlab.jobs.cli import contradictions_cmd, jobs_app
    from memlab.lifecycle.cli import consolidate_cmd
    from memlab.serve.cli import serve_cmd, status_cmd
    from memlab.tune.cli import sweep_cmd
    from memlab.bench.vramcli import vram_app
    from memlab.workspace.cli import workspace_app

    app.add_typer(workspace_app, name="workspace")
    app.add_typer(vram_app, name="vram")
    app.add_typer(datasets_app, name="datasets")
    app.add_typer(jobs_app, name="jobs")
    app.command("contradictions")(contradictions_cmd)   # the alias of `memlab jobs contradictions`
    app.command("bench")(bench)
    app.command("explain-misses")(explain_misses_cmd)
    app.command("sweep")(sweep_cmd)
    app.command("consolidate")(consolidate_cmd)
    app.command("status")(status_cmd)
    app.command("serve")(serve_cmd)


_mount()


def main() -> None:  # pragma: no cover
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
