"""``distill-mentions``: a smaller mention encoder for fast CPU linking."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import OVERRIDES, app
from .common import read_docs, save_with_setting
from .outputs import check_outputs, save_pipeline


@app.command("distill-mentions", context_settings=OVERRIDES)
def distill_mentions_command(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="Pipeline with a trained arbo_entity_linker")],
    corpus: Annotated[Path, typer.Argument(
        help=".spacy corpus whose doc.ents are the mentions to learn from (gold ids are not "
             "needed), e.g. the linker's training corpus")],
    output: Annotated[Path, typer.Option(help="Where to save the distilled pipeline")],
    layers: Annotated[int, typer.Option(help="Transformer layers of the student")] = 3,
    epochs: Annotated[int, typer.Option(help="Passes over the corpus's mentions")] = 6,
    batch_size: Annotated[int, typer.Option(help="Mentions per step")] = 32,
    learn_rate: Annotated[float, typer.Option(help="AdamW learning rate (linear decay)")] = 1e-4,
    top_k: Annotated[int, typer.Option(help="Teacher candidates the soft term ranks")] = 64,
    temperature: Annotated[float, typer.Option(help="Softmax temperature T")] = 2.0,
    vector_weight: Annotated[float, typer.Option(help="Weight β of the vector term")] = 1.0,
    quantize: Annotated[bool, typer.Option(
        help="Save the pipeline with quantize = true (int8 copies at inference)")] = True,
    mention_max_length: Annotated[int | None, typer.Option(
        help="Mention window (wordpieces) the saved pipeline links with, e.g. 24 for the "
             "fast setting; the student learns from the teacher's own windows (default: "
             "keep the teacher's)")] = None,
    limit: Annotated[int, typer.Option(help="Docs of CORPUS to read (0: all)")] = 0,
    seed: Annotated[int, typer.Option(help="Shuffling seed")] = 0,
    component: Annotated[str, typer.Option(help="The linker's name")] = "arbo_entity_linker",
) -> None:
    """Distil the linker's mention encoder into one with fewer layers (the fast CPU setting,
    BENCHMARKS.md); the entity encoder and its index are kept, so the saved pipeline links
    against the same KB vectors. `--components.x.y value` overrides apply at load."""
    import spacy
    from spacy.cli._util import parse_config_overrides
    from spacy.util import load_config
    from wasabi import msg

    from ..components.common import gold_mentions
    from ..errors import Errors
    from ..linking.mention_distiller import DistillSettings, MentionDistiller, shrink_encoder

    check_outputs({"MODEL": model, "CORPUS": corpus}, {"--output": output},
                  pipelines=("--output",))
    if mention_max_length is not None and mention_max_length < 8:
        msg.fail(Errors.E011.format(name="--mention-max-length", condition=">= 8 (24 is the "
                                    "measured fast setting)", value=mention_max_length),
                 exits=1)
    overrides = parse_config_overrides(ctx.args)
    pipeline = load_config(model / "config.cfg")["nlp"]["pipeline"]
    if component not in pipeline:
        msg.fail(f"{model} has no component '{component}' (it has {pipeline}): give a "
                 "pipeline with a trained arbo_entity_linker, or its name with --component",
                 exits=1)
    nlp = spacy.load(model, config={**overrides, f"components.{component}.quantize": quantize})
    linker = nlp.get_pipe(component)
    try:
        settings = DistillSettings(layers=layers, epochs=epochs, batch_size=batch_size,
                                   learn_rate=learn_rate, top_k=top_k, temperature=temperature,
                                   vector_weight=vector_weight, seed=seed)
        linker.ensure_ready()
        student = shrink_encoder(linker.retriever.encoders["mention"], layers)
        texts, spans, _ = gold_mentions(read_docs(corpus, nlp.vocab, limit))
        distiller = MentionDistiller(linker.retriever, student, settings)
        msg.info(f"Distilling {len(spans)} mentions into {layers} layers")
        distiller.fit(texts, spans,
                      on_epoch=lambda epoch, loss: msg.text(f"epoch {epoch}: loss {loss:.4f}"))
        linker.use_mention_encoder(student)
    except ValueError as err:
        msg.fail(str(err), exits=1)
    for name, pipe in nlp.pipeline:
        if getattr(pipe, "cfg", {}).get("linker") == component and hasattr(pipe, "clear_state"):
            # its remembered mentions were embedded by the teacher, and its λ is on the
            # teacher's score scale
            pipe.clear_state()
            msg.warn(f"{name} clusters the student's vectors now: its remembered mentions "
                     "are cleared; run tune-coref on the saved pipeline to choose its k and "
                     "λ again")
    save_pipeline(nlp, output)
    msg.good(f"Saved {output}: mention encoder with {layers} layers, quantize = {quantize}")
    if mention_max_length is not None:
        # in the saved config only: the distillation above read the teacher's windows
        save_with_setting(output, {}, f"components.{component}.mention_max_length",
                          mention_max_length, output)
