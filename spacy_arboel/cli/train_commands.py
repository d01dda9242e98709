"""``project-train``: one training step of project.yml with its dataset's settings
(configs/datasets.yml), so that ``--vars.dataset`` alone picks a real-data run."""

from pathlib import Path
from typing import Annotated

import typer

from ..configs import packaged_config
from ..errors import Errors
from .app import OVERRIDES, app

SETTINGS = Path("configs") / "datasets.yml"
LINKER_OBJECTIVE = "components.arbo_entity_linker.objective"
# a dataset's entries in SETTINGS that are not training steps: its KB's description (the
# package's meta.json) and the vocabularies of `prepare --synonyms default`
DATASET_FIELDS = ("kb", "synonyms")


def read_datasets(path: Path) -> dict:
    """The datasets' settings in ``path`` (empty where there is no such file or mapping;
    E153 when it cannot be read)."""
    import srsly

    try:
        settings = srsly.read_yaml(path) if path.exists() else None
    except (OSError, ValueError, RecursionError) as err:  # srsly: ValueError("Invalid YAML")
        raise ValueError(Errors.E153.format(path=path, problem=err)) from None
    return settings if isinstance(settings, dict) else {}


def dataset_settings(path: Path, step: str, dataset: str) -> tuple[Path, dict]:
    """The config file and the spaCy overrides of ``step`` on ``dataset`` in ``path``
    (E118 where it lacks them): the config beside ``path`` (``configs/ner.cfg``), else the
    one that comes with the package (``spacy_arboel/configs/``; E205 for neither)."""
    settings = read_datasets(path)
    described = settings.get(dataset)
    entry = described.get(step) if isinstance(described, dict) else None
    if not isinstance(entry, dict) or "config" not in entry:
        known = ", ".join(sorted(map(str, settings))) or "none"
        raise ValueError(Errors.E118.format(path=path, step=step, dataset=dataset,
                                            known=known))
    config = path.parent / f"{entry['config']}.cfg"  # the project's own, else the package's
    if not config.is_file():
        config = packaged_config(entry["config"])
    return config, dict(entry.get("overrides") or {})


@app.command("project-train", context_settings=OVERRIDES)
def project_train_command(
    ctx: typer.Context,
    step: Annotated[str, typer.Argument(help="linker, ner, reranker or e2e")],
    dataset: Annotated[str, typer.Argument(help="toy, bc5cdr or ncbi (a key of --settings)")],
    output: Annotated[Path, typer.Option(help="Output folder of spacy train")],
    settings: Annotated[Path, typer.Option(help="The datasets' settings")] = SETTINGS,
    gpu_id: Annotated[int, typer.Option(help="GPU id, -1 for the CPU")] = -1,
    objective: Annotated[str, typer.Option(
        help="linker step: the objective's name, or 'default' for the dataset's")] = "default",
) -> None:
    """`spacy train` of STEP's config with DATASET's overrides from configs/datasets.yml;
    extra --section.key value options (paths, and any setting) are added and win. The
    schedule is checked against the evaluation frequency first, every evaluation is
    recorded in OUTPUT/evaluations.jsonl, and after the last step the final model is
    evaluated on dev and becomes model-best where it scores best: a finished training
    never leaves its step-0 model as model-best."""
    from wasabi import msg

    from ..atomic import check_own_folder
    from ..ml.objectives import switched_objective
    from ..training.run import LOG_NAME, is_training_output, train_to_best
    from .outputs import check_outputs
    from .overrides import command_overrides

    check_outputs({"--settings": settings}, {"--output": output}, folders=["--output"])
    # a training folder holds what spacy train and the evaluation log write, only
    check_own_folder(output, "project-train", LOG_NAME, is_training_output)
    config, overrides = dataset_settings(settings, step, dataset)
    if objective != "default":
        if step != "linker":
            msg.fail(f"--objective applies to the linker step, not to '{step}'", exits=1)
        overrides[LINKER_OBJECTIVE] = switched_objective(objective, config, overrides)
    overrides.update(command_overrides(ctx))
    shown = " ".join(f"--{k} {v}" for k, v in overrides.items())
    msg.info(f"python -m spacy train {config} --output {output} --gpu-id {gpu_id} {shown}")
    train_to_best(config, output, use_gpu=gpu_id, overrides=overrides)


@app.command("package-meta")
def package_meta_command(
    model: Annotated[Path, typer.Argument(help="The pipeline to package", exists=True)],
    metrics_dir: Annotated[Path, typer.Argument(help="Its run's metrics folder", exists=True,
                                                file_okay=False)],
    output: Annotated[Path, typer.Option(help="The meta JSON for spacy package --meta-path")],
    dataset: Annotated[str, typer.Option(help="Its dataset (a key of --settings)")],
    objective: Annotated[str, typer.Option(help="The linker's objective (metric files)")] = "*",
    settings: Annotated[Path, typer.Option(help="The datasets' settings")] = SETTINGS,
) -> None:
    """Write the meta.json entries of a package: the metrics its run measured, and its KB
    (description from --settings, size, types, fingerprint)."""
    import srsly
    from wasabi import msg

    from ..evaluation.package_meta import package_meta
    from ..factories import pipeline_kb
    from ..pipeline.loading import load_pipeline
    from .outputs import check_outputs, write_text_atomic

    check_outputs({"MODEL": model, "METRICS_DIR": metrics_dir, "--settings": settings},
                  {"--output": output}, kinds={"--output": "json"})
    kb = pipeline_kb(load_pipeline(model))
    if kb is None:
        msg.fail(Errors.E119.format(path=model), exits=1)
    described = read_datasets(settings).get(dataset) or {}
    meta = package_meta(kb, metrics_dir, str(described.get("kb", "")), dataset, objective)
    write_text_atomic(output, srsly.json_dumps(meta, indent=2) + "\n")
    msg.good(f"Wrote {output}: {len(meta['performance'])} measured metrics, KB of "
             f"{meta['kb']['entities']} entities")
