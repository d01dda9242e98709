"""CLI commands for ``arbo_coref``: ``cluster`` a corpus, ``evaluate-coref``, ``tune-coref``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..factories import COREF
from ..outputs import atomic_file, check_outputs, same_path
from ..pipeline.loading import save_pipeline
from .app import OVERRIDES, app
from .common import check_corpus, report
from .options import CorefComponent, GoldCorpus, LinkerModel, MetricsOutput, RunName, TunedCoref
from .overrides import command_overrides


def tuned_settings(path: Path | None) -> dict:
    """The best settings of a ``tune-coref`` output file (none without a path; exit with
    E151 when it is no such file)."""
    from wasabi import msg

    from ..pipeline.coref_settings import read_tuned_settings

    if path is None:
        return {}
    try:
        return read_tuned_settings(path)
    except ValueError as err:
        msg.fail(str(err))
        raise SystemExit(1) from None


def _load(model: Path, ctx: typer.Context | None, component: str, settings_file=None,
          **settings):
    """``load_with_coref``: the pipeline with ``component`` configured by the tuned settings
    of ``settings_file``, ``settings`` and the `--components.x.y value` overrides."""
    from ..pipeline.coref_settings import load_with_coref

    return load_with_coref(model, component, command_overrides(ctx),
                           tuned=tuned_settings(settings_file), **settings)


@app.command("cluster", context_settings=OVERRIDES)
def cluster_command(
    ctx: typer.Context,
    input_path: Annotated[Path, typer.Argument(
        help="Input .spacy DocBin, or the output folder of `link-corpus --vectors`",
        exists=True)],
    output_path: Annotated[Path, typer.Argument(
        help="Output .spacy DocBin, or a folder for the clustered JSONL shards")],
    model: Annotated[Path, typer.Option(help="Pipeline with arbo_entity_linker")] = Path(
        "training/model-best"),
    gold_mentions: Annotated[bool, typer.Option(
        help="Cluster the input's own ents (skip ner) instead of finding mentions")] = True,
    buffer_size: Annotated[int | None, typer.Option(
        help="Docs clustered together; later buffers are clustered against the earlier "
             "ones (their mentions are remembered)")] = None,
    component: CorefComponent = COREF,
    settings: TunedCoref = None,
    recall_sample: Annotated[int, typer.Option(
        help="Folder input: measure the k-NN graph's edge recall against exact search on "
             "this many mentions (0: skip)")] = 0,
) -> None:
    """Cluster the mentions of a corpus across documents: kb_id and span._.cluster_id.

    The output keeps each ent's label and kb_id (the cluster's entity, or NIL) and stores
    `cluster_id` and `kb_candidates` in the docs' user data (DocBin store_user_data). Given
    the output folder of `link-corpus --vectors`, every mention of the corpus is clustered
    at once from the memory-mapped vectors (an IVF k-NN graph above 100k mentions) and each
    JSONL shard is written to OUTPUT_PATH with a `cluster` per entity; k, threshold,
    directed and nil_prefix come from --settings, the model's arbo_coref config and
    `--components.arbo_coref.x` overrides.
    """
    from spacy.tokens import DocBin
    from wasabi import msg

    from ..pipeline.clustering import cluster_docs, discovered_clusters

    check_outputs({"INPUT_PATH": input_path, "--model": model, "--settings": settings},
                  {"OUTPUT_PATH": output_path},
                  folders=["OUTPUT_PATH"] if input_path.is_dir() else (),
                  kinds={} if input_path.is_dir() else {"OUTPUT_PATH": "spacy"})
    if input_path.is_dir():
        _cluster_linked(ctx, input_path, output_path, model, component, settings,
                        recall_sample)
        return
    nlp = _load(model, ctx, component, settings, buffer_size=buffer_size, keep_state=True)
    out = cluster_docs(nlp, DocBin().from_disk(input_path).get_docs(nlp.vocab), component,
                       gold_mentions=gold_mentions)
    with atomic_file(output_path) as temp:
        out.docs.to_disk(temp)
    discovered = discovered_clusters(nlp, component, out.clusters)
    msg.good(f"Clustered {out.mentions} mentions of {len(out.docs)} docs into "
             f"{len(out.clusters)} clusters ({discovered} without a KB entity); saved "
             f"{output_path}")


def _cluster_linked(ctx: typer.Context | None, input_dir: Path, output_dir: Path,
                    model: Path, component: str, settings_file: Path | None,
                    recall_sample: int) -> None:
    """``cluster`` over a ``link-corpus --vectors`` output folder."""
    from wasabi import msg

    from ..corpus.linked_clusters import check_cluster_folder, cluster_linked
    from ..pipeline.coref_settings import linked_corpus_settings

    check_cluster_folder(output_dir)
    settings, same_doc_only = linked_corpus_settings(
        model, component, command_overrides(ctx), tuned=tuned_settings(settings_file))
    if same_doc_only:
        msg.warn(f"{component} has same_doc_only = true: clustering a linked corpus "
                 "links mentions across documents, so it is not applied here")
    summary = cluster_linked(input_dir, output_dir, recall_sample=recall_sample,
                             on_stage=msg.info, **settings)
    rows = [("mentions", summary.mentions), ("clusters", summary.clusters),
            ("clusters without a KB entity", summary.discovered),
            *((f"seconds: {stage}", f"{s:.1f}") for stage, s in summary.seconds.items())]
    if summary.edge_recall is not None:
        rows.append((f"k-NN edge recall ({recall_sample} mentions)",
                     f"{summary.edge_recall:.3f}"))
    msg.table(rows, title=f"cluster: {output_dir}")


@app.command("evaluate-coref", context_settings=OVERRIDES)
def evaluate_coref_command(
    ctx: typer.Context,
    model: LinkerModel,
    corpus: GoldCorpus,
    output: MetricsOutput = None,
    name: RunName = None,
    component: CorefComponent = COREF,
    settings: TunedCoref = None,
    heldout: Annotated[Path | None, typer.Option(
        help="heldout_ids.json of `prepare --holdout`: score those entities' mentions apart")
    ] = None,
) -> None:
    """Cluster the gold mentions of CORPUS: linking accuracy with clustering vs independent
    inference, NMI, ARI, MUC, B³, CEAF-e and CoNLL F1 (all mentions and out-of-KB ones)."""
    from spacy.tokens import DocBin

    from ..data.ids import read_heldout_ids
    from ..evaluation.coref_eval import evaluate_coref, gold_mention_examples
    from ..factories import NER, find_components

    check_outputs({"MODEL": model, "CORPUS": corpus, "--settings": settings,
                   "--heldout": heldout}, {"--output": output}, kinds={"--output": "json"})
    check_corpus(corpus)
    heldout_ids = read_heldout_ids(heldout) if heldout else None  # E152
    nlp = _load(model, ctx, component, settings)
    examples = gold_mention_examples(nlp, DocBin().from_disk(corpus).get_docs(nlp.vocab))
    with nlp.select_pipes(disable=find_components(nlp, NER)):
        metrics = evaluate_coref(
            nlp, examples, component=component,
            heldout=heldout_ids)
    report(metrics, output, corpus=corpus,
           title=f"{name or model.name}: {corpus.name}, clustered",
           table=(None, _summary(metrics)), name=name)


def _summary(metrics: dict) -> list[tuple[str, str]]:
    def fmt(value) -> str:
        return "–" if value is None else f"{value:.3f}"

    c, i, co, oo = (metrics[k] for k in ("clustering", "independent", "coref",
                                          "coref_out_of_kb"))
    return [
        ("accuracy, clustering (all / in-KB)", f"{fmt(c['all']['accuracy'])} / "
                                               f"{fmt(c['in_kb']['accuracy'])}"),
        ("accuracy, independent (all / in-KB)", f"{fmt(i['all']['accuracy'])} / "
                                                f"{fmt(i['in_kb']['accuracy'])}"),
        ("seen / unseen accuracy, clustering", f"{fmt(c['seen']['accuracy'])} / "
                                               f"{fmt(c['unseen']['accuracy'])}"),
        ("out-of-KB mentions put in NIL clusters", fmt(c["out_of_kb"]["nil_accuracy"])),
        ("NMI / ARI", f"{fmt(co.get('nmi'))} / {fmt(co.get('ari'))}"),
        ("MUC / B3 / CEAF-e F1", " / ".join(fmt(co[m]["f"]) if m in co else "–"
                                           for m in ("muc", "b3", "ceafe"))),
        ("CoNLL F1", fmt(co.get("conll_f1"))),
        ("out-of-KB NMI / ARI", f"{fmt(oo.get('nmi'))} / {fmt(oo.get('ari'))}"),
        ("mention recall@64", fmt(metrics["mention_recall@64"])),
    ]


@app.command("tune-coref", context_settings=OVERRIDES)
def tune_coref_command(
    ctx: typer.Context,
    model: LinkerModel,
    corpus: Annotated[Path, typer.Argument(help="Gold dev .spacy DocBin")],
    output: Annotated[Path | None, typer.Option(
        help="JSON with the best settings and every row")] = None,
    ks: Annotated[list[int] | None, typer.Option(
        "--k", help="k values to try (repeatable; default 1 2 4 8 16)")] = None,
    metric: Annotated[str, typer.Option(
        help="conll_f1, nmi, ari or accuracy (NIL counts as right for out-of-KB)")] = "conll_f1",
    component: CorefComponent = COREF,
    max_accuracy_loss: Annotated[float, typer.Option(
        help="Settings losing more in-KB linking accuracy than this against independent linking "
             "are chosen only if all do; a negative value turns the constraint off")] = 0.02,
) -> None:
    """Choose k, λ and directed/undirected on dev; λ candidates are quantiles (20-99.5%) of
    the mentions' nearest-entity dissimilarities, plus none."""
    from spacy.tokens import DocBin
    from wasabi import msg

    from ..evaluation.coref_eval import gold_mention_examples, tune_coref
    from ..evaluation.report import write_json
    from ..factories import NER, find_components

    check_outputs({"MODEL": model, "CORPUS": corpus}, {"--output": output},
                  kinds={"--output": "json"})
    check_corpus(corpus)
    nlp = _load(model, ctx, component)
    examples = gold_mention_examples(nlp, DocBin().from_disk(corpus).get_docs(nlp.vocab))
    with nlp.select_pipes(disable=find_components(nlp, NER)):
        best, rows = tune_coref(nlp, examples, component=component, ks=ks or (1, 2, 4, 8, 16),
                                metric=metric,
                                max_accuracy_loss=max_accuracy_loss if max_accuracy_loss >= 0
                                else None)
    msg.table([(r["k"], r["threshold"], r["directed"], f"{r['value']:.4f}",
                f"{r['accuracy_loss']:+.4f}") for r in rows],
              header=("k", "λ", "directed", metric, "accuracy lost"),
              aligns=("r", "r", "l", "r", "r"))
    msg.good(f"Best: k={best['k']} threshold={best['threshold']} directed={best['directed']}"
             f" ({metric} {best['value']:.4f}, linking accuracy lost "
             f"{best['accuracy_loss']:+.4f})")
    if output:
        write_json({"best": best, "rows": rows}, output)


@app.command("add-coref", context_settings=OVERRIDES)
def add_coref_command(
    ctx: typer.Context,
    model: LinkerModel,
    output: Annotated[Path | None, typer.Option(
        help="Where to save (default: MODEL, updated in place)")] = None,
    settings: TunedCoref = None,
    component: CorefComponent = COREF,
) -> None:
    """Add arbo_coref to a saved pipeline (or re-configure it) with tuned settings. The
    pipeline is saved whole or not at all: a failed save leaves the old one as it was."""
    from wasabi import msg

    target = output or model
    in_place = same_path(target, model)
    target_name = "--output" if output else "MODEL"
    check_outputs({"--settings": settings, **({} if in_place else {"MODEL": model})},
                  {target_name: target}, [target_name])
    nlp = _load(model, ctx, component, settings)
    save_pipeline(nlp, target)
    chosen = nlp.get_pipe(component).settings
    msg.good(f"Saved {target} with {component}: k={chosen.k} "
             f"threshold={chosen.threshold} directed={chosen.directed}")
