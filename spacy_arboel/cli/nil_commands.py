"""``tune-nil``: choose arbo_entity_linker's NIL threshold on dev (PEL §5.3) and save it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..factories import ENTITY_LINKER
from ..outputs import check_outputs
from .app import OVERRIDES, app
from .common import check_corpus, read_docs, save_with_setting
from .options import LinkerComponent, LinkerModel, MetricsOutput
from .overrides import command_overrides


@app.command("tune-nil", context_settings=OVERRIDES)
def tune_nil_command(
    ctx: typer.Context,
    model: LinkerModel,
    dev: Annotated[Path, typer.Argument(help="Dev .spacy DocBin whose gold ids include NILs")],
    test: Annotated[Path | None, typer.Option(help="Test .spacy DocBin to evaluate on")] = None,
    output_model: Annotated[Path | None, typer.Option(
        help="Save the pipeline with the tuned threshold here")] = None,
    output: MetricsOutput = None,
    plot: Annotated[Path | None, typer.Option(
        help="NIL precision-recall curve (PNG) of the test set, else of dev")] = None,
    name: Annotated[str, typer.Option(help="Run name (JSON and plot legend)")] = "linker",
    component: LinkerComponent = ENTITY_LINKER,
    limit: Annotated[int, typer.Option(help="Use the first N docs of each corpus (0 = all)")] = 0,
) -> None:
    """Tune the score threshold below which a mention gets the NIL id, to maximise NIL F1 on
    DEV; report NIL P/R/F1 and auPR (and accuracy over all mentions, NIL included) on dev and
    TEST, plot the NIL PR curve, and save the pipeline with the threshold in its config."""
    from wasabi import msg

    from ..evaluation.nil import nil_scores, plot_nil_pr_curves, tune_nil_threshold
    from ..evaluation.report import write_json
    from ..pipeline.loading import load_pipeline

    check_outputs({"MODEL": model, "DEV": dev, "--test": test},
                  {"--output-model": output_model, "--output": output, "--plot": plot},
                  ["--output-model"], kinds={"--output": "json", "--plot": "png"})
    for corpus in (dev, test):
        if corpus is not None:
            check_corpus(corpus, limit)
    overrides = command_overrides(ctx)
    nlp = load_pipeline(model, overrides)

    def read(path: Path):
        return nil_scores(nlp, read_docs(path, nlp.vocab, limit), component=component)

    dev_scores = read(dev)
    tuned = tune_nil_threshold(dev_scores.scores, dev_scores.is_nil)
    msg.good(f"NIL threshold {tuned.threshold:.4f}: dev NIL P {tuned.precision:.3f} "
             f"R {tuned.recall:.3f} F1 {tuned.f1:.3f}")
    metrics = {"name": name, "model": str(model), "threshold": tuned.threshold,
               "dev": _split_metrics(dev_scores, tuned.threshold)}
    curve = dev_scores
    if test is not None:
        curve = read(test)
        metrics["test"] = _split_metrics(curve, tuned.threshold)
        t = metrics["test"]["nil"]
        msg.info(f"test NIL P {t['precision']:.3f} R {t['recall']:.3f} F1 {t['f1']:.3f} "
                 f"auPR {t['au_pr']:.3f}; accuracy incl. NIL "
                 f"{metrics['test']['accuracy_with_nil']:.3f}")
    if plot is not None:
        plot_nil_pr_curves({name: (curve.scores, curve.is_nil)}, plot)
        msg.good(f"Wrote {plot}")
    if output is not None:
        write_json(metrics, output)
        msg.good(f"Wrote {output}")
    if output_model is not None:
        save_with_setting(model, overrides, f"components.{component}.threshold",
                          tuned.threshold, output_model)


def _split_metrics(scores, threshold: float) -> dict:
    from ..evaluation.nil import nil_metrics

    return {"nil": nil_metrics(scores.scores, scores.is_nil, threshold),
            "accuracy_with_nil": scores.accuracy(threshold),
            "accuracy_in_kb_no_threshold": scores.in_kb_accuracy()}
