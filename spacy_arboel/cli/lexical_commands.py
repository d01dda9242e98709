"""``tune-lexical``: choose arbo_entity_linker's weight of BioSyn's lexical score on dev and
save it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..factories import ENTITY_LINKER
from ..outputs import check_outputs
from .app import OVERRIDES, app
from .common import check_corpus, read_docs, save_with_setting
from .options import LinkerComponent, LinkerModel
from .overrides import command_overrides


@app.command("tune-lexical", context_settings=OVERRIDES)
def tune_lexical_command(
    ctx: typer.Context,
    model: LinkerModel,
    dev: Annotated[Path, typer.Argument(help="Dev .spacy DocBin with gold kb ids")],
    output_model: Annotated[Path | None, typer.Option(
        help="Save the pipeline with the tuned lexical_weight here")] = None,
    output: Annotated[Path | None, typer.Option(help="JSON of R@1 by weight")] = None,
    component: LinkerComponent = ENTITY_LINKER,
    top_k: Annotated[int, typer.Option(help="Dense and lexical candidates per mention")] = 64,
    limit: Annotated[int, typer.Option(help="Use the first N docs of DEV (0 = all)")] = 0,
) -> None:
    """Choose the weight of the character n-gram TF-IDF score added to the dense score
    (BioSyn), maximising in-KB recall@1 on DEV's gold mentions over the union of the dense
    and lexical top-k, and save the pipeline with it (``get_candidates.lexical_weight`` in
    its config). A weight of 0 means the lexical candidates join the dense ones but do not
    change scores."""
    from wasabi import msg

    from ..evaluation.report import write_json
    from ..pipeline.loading import load_pipeline
    from ..pipeline.tuning import tune_lexical_weight

    check_outputs({"MODEL": model, "DEV": dev},
                  {"--output-model": output_model, "--output": output}, ["--output-model"],
                  kinds={"--output": "json"})
    check_corpus(dev, limit)
    overrides = command_overrides(ctx)
    nlp = load_pipeline(model, overrides)
    weight, by_weight = tune_lexical_weight(nlp, component, read_docs(dev, nlp.vocab, limit),
                                            top_k)
    msg.table([(f"{w:g}", f"{r:.4f}") for w, r in by_weight.items()],
              header=("lexical_weight", "dev in-KB R@1"), aligns=("r", "r"))
    msg.good(f"lexical_weight {weight:g}: dev in-KB R@1 {by_weight[weight]:.4f}")
    if output is not None:
        write_json({"model": str(model), "lexical_weight": weight,
                    "dev_recall@1": {f"{w:g}": r for w, r in by_weight.items()}}, output)
        msg.good(f"Wrote {output}")
    if output_model is not None:
        save_with_setting(model, overrides,
                          f"components.{component}.get_candidates.lexical_weight", weight,
                          output_model)
