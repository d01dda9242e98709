"""Evaluation commands: compare the metric files of several runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import Errors
from ..evaluation.report import (
    flat_rows,
    linking_rows,
    markdown_table,
    plot_recall_at_k,
    read_metrics,
    rerank_rows,
)
from ..factories import ENTITY_LINKER
from ..outputs import check_outputs, write_text_atomic
from .app import OVERRIDES, app
from .common import check_corpus, read_docs, report, save_with_setting, use_gpu
from .options import (
    DocLimit,
    GoldCorpus,
    GpuId,
    IndexKind,
    LinkerComponent,
    MetricsOutput,
    Oracle,
    PipelineModel,
    RunName,
)
from .overrides import command_overrides


def _load_run(path: Path) -> tuple[str, dict[str, Any]]:
    """Read a metrics JSON file; the run name is its "name" key or else the file stem."""
    try:
        name, metrics = read_metrics(path)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    return name or path.stem, metrics


@app.command("compare-runs")
def compare_runs(
    results: Annotated[
        list[Path],
        typer.Argument(help="Metric JSON files (from `evaluate`); one run each.", exists=True,
                       dir_okay=False, readable=True),
    ],
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Write the Markdown table here.")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write the in-KB recall@k plot (PNG) here.")
    ] = None,
) -> None:
    """Tabulate the linking metrics of several runs and plot their in-KB recall@k."""
    check_outputs({"RESULTS": results}, {"--markdown": markdown, "--plot": plot},
                  kinds={"--plot": "png"})
    runs: dict[str, dict[str, Any]] = {}
    for path in results:
        name, metrics = _load_run(path)
        unique, i = name, 2
        while unique in runs:
            unique, i = f"{name} ({i})", i + 1
        runs[unique] = metrics
    table = markdown_table(runs)
    typer.echo(table, nl=False)
    if markdown is not None:
        write_text_atomic(markdown, table)
        typer.echo(f"Wrote {markdown}")
    if plot is not None:
        plot_recall_at_k(runs, plot)
        typer.echo(f"Wrote {plot}")


@app.command("evaluate", context_settings=OVERRIDES)
def evaluate(
    ctx: typer.Context,
    model: PipelineModel,
    corpus: GoldCorpus,
    output: MetricsOutput = None,
    name: RunName = None,
    component: LinkerComponent = ENTITY_LINKER,
    limit: DocLimit = 0,
    encoder_rate: Annotated[bool, typer.Option(help="Also time the raw encoder")] = True,
    index_kind: Annotated[
        IndexKind | None, typer.Option(help="Override the index kind (auto: by size)")
    ] = None,
    quantize: Annotated[
        bool | None, typer.Option(help="Override int8 quantised inference")
    ] = None,
    seen_from: Annotated[Path | None, typer.Option(
        help="Training corpus (.spacy) whose gold ids count as seen (default: the linker's "
             "own training corpus); splits an untrained linker's scores alike")] = None,
    gpu_id: GpuId = -1,
) -> None:
    """Link the gold mentions of CORPUS with MODEL: recall@k, accuracy, splits, throughput.

    Further settings override the pipeline's config as in `spacy train`, e.g.
    `--components.arbo_entity_linker.expand_abbreviations true`.
    """
    from spacy.tokens import DocBin
    from wasabi import msg

    from ..evaluation.pipeline_eval import evaluate_linker
    from ..pipeline.loading import load_pipeline
    from ..spacy_data.gold_ids import resolved_gold_ids

    check_outputs({"MODEL": model, "CORPUS": corpus, "--seen-from": seen_from},
                  {"--output": output}, kinds={"--output": "json"})
    check_corpus(corpus, limit)
    overrides = {k: v for k, v in (("index_kind", index_kind), ("quantize", quantize))
                 if v is not None}
    config = {f"components.{component}.{k}": v for k, v in overrides.items()}
    config.update(command_overrides(ctx))
    use_gpu(gpu_id)
    nlp = load_pipeline(model, config)
    docs = list(DocBin().from_disk(corpus).get_docs(nlp.vocab))
    if limit:
        docs = docs[:limit]
    seen_ids = None
    if seen_from is not None:
        check_corpus(seen_from, 0)
        kb = nlp.get_pipe(component).kb
        seen_ids = {i for doc in DocBin().from_disk(seen_from).get_docs(nlp.vocab)
                    for ent in doc.ents for i in resolved_gold_ids(ent.kb_id_, kb)}
    metrics = evaluate_linker(nlp, docs, component=component, measure_encoder=encoder_rate,
                              seen_ids=seen_ids)
    msg.table(flat_rows(metrics["timings"]), title="timings", aligns=("l", "r"))
    report(metrics, output, corpus=corpus, title=f"{name or model.name}: {corpus.name}",
           table=linking_rows(metrics), name=name)


@app.command("evaluate-e2e", context_settings=OVERRIDES)
def evaluate_e2e(
    ctx: typer.Context,
    model: PipelineModel,
    corpus: GoldCorpus,
    output: MetricsOutput = None,
    limit: DocLimit = 0,
    batch_size: Annotated[int, typer.Option(help="Docs per nlp.pipe batch")] = 8,
    disable: Annotated[list[str] | None, typer.Option(
        help="Components to disable, e.g. arbo_coref for the ner + linker baseline")] = None,
    gpu_id: GpuId = -1,
) -> None:
    """End-to-end linking of CORPUS's raw text with MODEL (arbo_linker, or ner +
    arbo_entity_linker): InKB micro P/R/F1 with strong matching, retriever recall@K, docs/s.

    Further settings override the pipeline's config, e.g.
    `--components.arbo_linker.top_k 8`.
    """
    from wasabi import msg

    from ..evaluation.end_to_end_eval import evaluate_end_to_end
    from ..pipeline.loading import load_pipeline

    check_outputs({"MODEL": model, "CORPUS": corpus}, {"--output": output},
                  kinds={"--output": "json"})
    check_corpus(corpus, limit)
    use_gpu(gpu_id)
    nlp = load_pipeline(model, command_overrides(ctx), disable=disable or [])
    metrics = evaluate_end_to_end(nlp, read_docs(corpus, nlp.vocab, limit),
                                  batch_size=batch_size)
    if not metrics["in_kb"]["n_predicted"]:
        msg.fail(Errors.E045.format(model=model, corpus=corpus,
                                    n_docs=metrics["timings"]["docs"]), exits=1)
    report(metrics, output, corpus=corpus,
           title=f"{model.name}: {corpus.name}, end to end",
           context={"model": str(model), "corpus": str(corpus), "pipeline": nlp.pipe_names})


@app.command("evaluate-rerank", context_settings=OVERRIDES)
def evaluate_rerank(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="Pipeline with arbo_entity_linker and "
                                               "arbo_reranker")],
    corpus: GoldCorpus,
    oracle: Annotated[list[Oracle] | None, typer.Option(
        help="none, self (gold injected) or union (gold injected into the union with "
             "--union-with); repeat the option for several, all from one scoring pass")
    ] = None,
    top_k: Annotated[list[int] | None, typer.Option(
        help="Candidates re-ranked (repeat for several K); default: the re-ranker's top_k")
    ] = None,
    union_with: Annotated[list[Path] | None, typer.Option(
        help="Other linker pipelines whose candidates join the union oracle")] = None,
    output: MetricsOutput = None,
    limit: DocLimit = 0,
) -> None:
    """Re-rank the linker's candidates of CORPUS's gold mentions with the cross-encoder:
    accuracy before and after, normalised accuracy, seen/unseen, pairs/s, one run per oracle
    and K (arboEL's oracle settings). Further settings override the config, e.g.
    `--components.arbo_reranker.batch_size 32`."""
    from ..evaluation.rerank_eval import evaluate_reranker
    from ..pipeline.loading import load_pipeline

    check_outputs({"MODEL": model, "CORPUS": corpus, "--union-with": union_with},
                  {"--output": output}, kinds={"--output": "json"})
    check_corpus(corpus, limit)
    nlp = load_pipeline(model, command_overrides(ctx))
    others = [load_pipeline(path) for path in union_with or []]
    metrics = evaluate_reranker(nlp, read_docs(corpus, nlp.vocab, limit),
                                oracles=[o.value for o in oracle or []] or ["none"],
                                top_ks=top_k or [], union_with=others)
    report(metrics, output, corpus=corpus,
           title=f"{model.name}: {corpus.name}, re-ranked (in-KB accuracy)",
           table=rerank_rows(metrics),
           context={"model": str(model), "corpus": str(corpus),
                    "union_with": [str(p) for p in union_with or []]})


@app.command("tune-e2e", context_settings=OVERRIDES)
def tune_e2e(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="Pipeline with arbo_linker")],
    dev: Annotated[Path, typer.Argument(help="Dev .spacy DocBin (ents with kb_id)")],
    thresholds: Annotated[list[float] | None, typer.Option(
        "--threshold", help="A threshold to try (repeat the option); default: 0.001 to 0.95")
    ] = None,
    output_model: Annotated[Path | None, typer.Option(
        help="Save the pipeline with the best threshold here")] = None,
    output: Annotated[Path | None, typer.Option(help="JSON of every threshold's scores")] = None,
    limit: Annotated[int, typer.Option(help="Use the first N docs (0 = all)")] = 0,
    component: Annotated[str, typer.Option(
        help="The linker whose threshold is tuned (default: arbo_linker if the pipeline has "
             "one, else arbo_entity_linker)")] = "",
) -> None:
    """Choose the linker's threshold that maximises InKB micro F1 on DEV's raw text (one
    reading of the docs, every threshold scored from it) and save the pipeline with it:
    arbo_linker's on its link score (p(m)·p(e | m), or p_span × p_rank for the passage
    reader), or, after a ner, arbo_entity_linker's NIL threshold on the best candidate's score
    (default candidates: quantiles of the linked ents' scores)."""
    from wasabi import msg

    from ..evaluation.end_to_end_eval import THRESHOLDS, tune_linker_threshold, tune_threshold
    from ..evaluation.report import write_json
    from ..factories import (
        ENTITY_LINKER,
        LINKER,
        LINKER_FACTORIES,
        find_component,
        find_components,
    )
    from ..pipeline.loading import load_pipeline

    check_outputs({"MODEL": model, "DEV": dev},
                  {"--output": output, "--output-model": output_model}, ["--output-model"],
                  kinds={"--output": "json"})
    check_corpus(dev, limit)
    overrides = command_overrides(ctx)
    nlp = load_pipeline(model, overrides)
    if component:
        factories = LINKER_FACTORIES
    else:  # arbo_linker where the pipeline has one, else the arbo_entity_linker after a ner
        factories = LINKER if find_components(nlp, LINKER) else ENTITY_LINKER
    component = find_component(nlp, factories, component or None, where=str(model))
    gold_docs = read_docs(dev, nlp.vocab, limit)
    if component in find_components(nlp, ENTITY_LINKER):
        best, rows = tune_linker_threshold(nlp, gold_docs, component, thresholds)
    else:
        best, rows = tune_threshold(nlp.get_pipe(component), gold_docs,
                                    thresholds or THRESHOLDS)
    msg.table([(r["threshold"], f"{r['precision']:.3f}", f"{r['recall']:.3f}",
                f"{r['f1']:.3f}") for r in rows], header=("threshold", "P", "R", "F1"))
    msg.good(f"Best threshold {best['threshold']}: F1 {best['f1']:.3f}")
    if output is not None:
        write_json({"model": str(model), "dev": str(dev), "best": best, "rows": rows}, output)
    if output_model is not None:
        if best["threshold"] is None and component in find_components(nlp, ENTITY_LINKER):
            # the row without a threshold won: never NIL, not the KB's default threshold
            overrides = {**overrides, f"components.{component}.nil_recall": None}
        save_with_setting(model, overrides, f"components.{component}.threshold",
                          best["threshold"], output_model)
