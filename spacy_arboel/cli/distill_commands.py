"""``distill-mentions``: a smaller mention encoder for fast CPU linking."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..factories import ENTITY_LINKER
from ..linking.loop_settings import DistillSettings
from ..outputs import check_outputs
from ..pipeline.loading import save_pipeline
from .app import OVERRIDES, app
from .common import read_docs, save_with_setting
from .overrides import command_overrides

DISTILL = DistillSettings()  # the defaults of the options


@app.command("distill-mentions", context_settings=OVERRIDES)
def distill_mentions_command(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="Pipeline with a trained arbo_entity_linker")],
    corpus: Annotated[Path, typer.Argument(
        help=".spacy corpus whose doc.ents are the mentions to learn from (gold ids are not "
             "needed), e.g. the linker's training corpus")],
    output: Annotated[Path, typer.Option(help="Where to save the distilled pipeline")],
    layers: Annotated[int, typer.Option(help="Transformer layers of the student")] = DISTILL.layers,
    epochs: Annotated[int, typer.Option(help="Passes over the corpus's mentions")] = DISTILL.epochs,
    batch_size: Annotated[int, typer.Option(help="Mentions per step")] = DISTILL.batch_size,
    learn_rate: Annotated[float, typer.Option(
        help="AdamW learning rate (linear decay)")] = DISTILL.learning_rate,
    top_k: Annotated[int, typer.Option(
        help="Teacher candidates the soft term ranks")] = DISTILL.top_k,
    temperature: Annotated[float, typer.Option(help="Softmax temperature T")] = DISTILL.temperature,
    vector_weight: Annotated[float, typer.Option(
        help="Weight β of the vector term")] = DISTILL.vector_weight,
    quantize: Annotated[bool, typer.Option(
        help="Save the pipeline with quantize = true (int8 copies at inference)")] = True,
    mention_max_length: Annotated[int | None, typer.Option(
        help="Mention window (wordpieces) the saved pipeline links with, e.g. 24 for the "
             "fast setting; the student learns from the teacher's own windows (default: "
             "keep the teacher's)")] = None,
    limit: Annotated[int, typer.Option(help="Docs of CORPUS to read (0: all)")] = 0,
    seed: Annotated[int, typer.Option(help="Shuffling seed")] = DISTILL.seed,
    component: Annotated[str, typer.Option(help="The linker's name")] = ENTITY_LINKER,
) -> None:
    """Distil the linker's mention encoder into one with fewer layers (the fast CPU setting,
    BENCHMARKS.md); the entity encoder and its index are kept, so the saved pipeline links
    against the same KB vectors. `--components.x.y value` overrides apply at load."""
    from wasabi import msg

    from ..errors import Errors
    from ..factories import ENTITY_LINKER, find_component
    from ..pipeline.loading import load_pipeline, pipeline_config
    from ..pipeline.mention_encoders import distill_mention_encoder

    check_outputs({"MODEL": model, "CORPUS": corpus}, {"--output": output},
                  pipelines=("--output",))
    if mention_max_length is not None and mention_max_length < 8:
        msg.fail(Errors.E011.format(name="--mention-max-length", condition=">= 8 (24 is the "
                                    "measured fast setting)", value=mention_max_length),
                 exits=1)
    overrides = command_overrides(ctx)
    find_component(pipeline_config(model), ENTITY_LINKER, component,
                   where=str(model))
    nlp = load_pipeline(model, {**overrides, f"components.{component}.quantize": quantize})
    settings = DistillSettings(layers=layers, epochs=epochs, batch_size=batch_size,
                               learning_rate=learn_rate, top_k=top_k, temperature=temperature,
                               vector_weight=vector_weight, seed=seed)
    cleared = distill_mention_encoder(
        nlp, component, read_docs(corpus, nlp.vocab, limit), settings,
        on_start=lambda n: msg.info(f"Distilling {n} mentions into {layers} layers"),
        on_epoch=lambda epoch, loss: msg.text(f"epoch {epoch}: loss {loss:.4f}"))
    for name in cleared:
        # its remembered mentions were embedded by the teacher, and its λ is on the
        # teacher's score scale
        msg.warn(f"{name} clusters the student's vectors now: its remembered mentions "
                 "are cleared; run tune-coref on the saved pipeline to choose its k and "
                 "λ again")
    save_pipeline(nlp, output)
    msg.good(f"Saved {output}: mention encoder with {layers} layers, quantize = {quantize}")
    if mention_max_length is not None:
        # in the saved config only: the distillation above read the teacher's windows
        save_with_setting(output, {}, f"components.{component}.mention_max_length",
                          mention_max_length, output)
