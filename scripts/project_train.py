"""``train``: one training step of project.yml with its dataset's settings
(configs/datasets.yml), so that ``--vars.dataset`` alone picks a real-data run."""

from pathlib import Path
from typing import Annotated

import typer

from dataset_settings import SETTINGS, dataset_settings
from project_app import OVERRIDES, app

LINKER_OBJECTIVE = "components.arbo_entity_linker.objective"


@app.command("train", context_settings=OVERRIDES)
def project_train_command(
    ctx: typer.Context,
    step: Annotated[str, typer.Argument(help="linker, ner, reranker or e2e")],
    dataset: Annotated[str, typer.Argument(help="toy, bc5cdr or ncbi (a key of --settings)")],
    output: Annotated[Path, typer.Option(help="Output folder of spacy train")],
    settings: Annotated[Path, typer.Option(help="The datasets' settings")] = SETTINGS,
    gpu_id: Annotated[int, typer.Option(help="GPU id, -1 for the CPU")] = -1,
    objective: Annotated[str, typer.Option(
        help="linker step: the objective's name, or 'default' for the dataset's")] = "default",
    shipped_kb: Annotated[Path | None, typer.Option(
        help="linker step: the KB the trained pipelines ship, given them after training "
             "(--paths.kb is the KB they train and choose model-best with: prepare's "
             "kb-train.jsonl, without dev's surface forms)")] = None,
) -> None:
    """`spacy train` of STEP's config with DATASET's overrides from configs/datasets.yml;
    extra --section.key value options (paths, and any setting) are added and win. The
    schedule is checked against the evaluation frequency first, every evaluation is
    recorded in OUTPUT/evaluations.jsonl, and after the last step the final model is
    evaluated on dev and becomes model-best where it scores best: a finished training
    never leaves its step-0 model as model-best."""
    from wasabi import msg

    from spacy_arboel.atomic import check_own_folder
    from spacy_arboel.cli.overrides import command_overrides
    from spacy_arboel.ml.objectives import switched_objective
    from spacy_arboel.outputs import check_outputs
    from train_to_best import LOG_NAME, is_training_output, ship_kb, train_to_best

    check_outputs({"--settings": settings, "--shipped-kb": shipped_kb}, {"--output": output},
                  folders=["--output"])
    if shipped_kb is not None and step != "linker":
        msg.fail(f"--shipped-kb applies to the linker step, not to '{step}'", exits=1)
    # a training folder holds what spacy train and the evaluation log write, only
    check_own_folder(output, "train", LOG_NAME, is_training_output)
    config, overrides = dataset_settings(settings, step, dataset)
    if objective != "default":
        if step != "linker":
            msg.fail(f"--objective applies to the linker step, not to '{step}'", exits=1)
        overrides[LINKER_OBJECTIVE] = switched_objective(objective, config, overrides)
    overrides.update(command_overrides(ctx))
    shown = " ".join(f"--{k} {v}" for k, v in overrides.items())
    msg.info(f"python -m spacy train {config} --output {output} --gpu-id {gpu_id} {shown}")
    train_to_best(config, output, use_gpu=gpu_id, overrides=overrides)
    if shipped_kb is not None:
        ship_kb(output, shipped_kb, "arbo_entity_linker")
