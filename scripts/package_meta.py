"""What a packaged pipeline's meta.json says of itself: the metrics its run measured (from
the run's metric files) and a description of its knowledge base."""

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from dataset_settings import SETTINGS, read_datasets
from project_app import app
from project_errors import ProjectErrors
from spacy_arboel.evaluation.report import read_metrics
from spacy_arboel.kb.knowledge_base import KnowledgeBase

# (metric file pattern, key in the file, key in meta.json's "performance")
PERFORMANCE = (
    ("pipeline_{objective}.json", ("ents_p",), "ents_p"),
    ("pipeline_{objective}.json", ("ents_r",), "ents_r"),
    ("pipeline_{objective}.json", ("ents_f",), "ents_f"),
    ("pipeline_{objective}.json", ("nel_inkb_acc",), "nel_inkb_acc"),
    ("pipeline_{objective}.json", ("coref_conll_f1",), "coref_conll_f1"),
    ("linker_{objective}.json", ("in_kb", "recall@1"), "linker_inkb_recall@1"),
    ("linker_{objective}.json", ("in_kb", "recall@64"), "linker_inkb_recall@64"),
    ("linker_{objective}.json", ("timings", "linking_mentions_per_s"), "linker_mentions_per_s"),
    ("e2e_ner_linker.json", ("in_kb", "precision"), "e2e_inkb_p"),
    ("e2e_ner_linker.json", ("in_kb", "recall"), "e2e_inkb_r"),
    ("e2e_ner_linker.json", ("in_kb", "f1"), "e2e_inkb_f"),
    ("e2e_ner_linker.json", ("timings", "docs_per_s"), "e2e_docs_per_s"),
)


def measured_performance(folder: str | Path, objective: str = "*") -> dict[str, float]:
    """The shipped pipeline's test metrics found in a run's metrics folder: those of the
    linker trained with ``objective`` (the first file where more match)."""
    out: dict[str, float] = {}
    for pattern, keys, name in PERFORMANCE:
        files = sorted(Path(folder).glob(pattern.format(objective=objective)))
        if not files:
            continue
        value: Any = read_metrics(files[0])[1]
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, int | float):
            out[name] = round(float(value), 4)
    return out


def kb_description(kb: KnowledgeBase, text: str = "") -> dict[str, Any]:
    """``text`` with the KB's size, types and fingerprint (meta.json's ``kb``)."""
    types = Counter(t for entity in kb for t in entity.types)
    return {"description": text, "entities": len(kb),
            "aliases": sum(len(entity.aliases) for entity in kb),
            "types": dict(sorted(types.items())), "fingerprint": kb.fingerprint()}


def package_meta(kb: KnowledgeBase, metrics_folder: str | Path, kb_text: str = "",
                 dataset: str = "", objective: str = "*") -> dict[str, Any]:
    """The meta.json entries ``spacy package --meta-path`` adds: measured ``performance``,
    the ``kb`` and a ``description`` naming both."""
    kb_meta = kb_description(kb, kb_text)
    described = f"{kb_meta['entities']:,} entities" + (f": {kb_text}" if kb_text else "")
    return {"description": (f"ner + arbo_entity_linker + arbo_coref trained on {dataset} "
                            f"by spacy-arboel; links to a KB of {described}"),
            "performance": measured_performance(metrics_folder, objective), "kb": kb_meta}


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

    from spacy_arboel.factories import pipeline_kb
    from spacy_arboel.outputs import check_outputs, write_text_atomic
    from spacy_arboel.pipeline.loading import load_pipeline

    check_outputs({"MODEL": model, "METRICS_DIR": metrics_dir, "--settings": settings},
                  {"--output": output}, kinds={"--output": "json"})
    kb = pipeline_kb(load_pipeline(model))
    if kb is None:
        msg.fail(ProjectErrors.E119.format(path=model), exits=1)
    described = read_datasets(settings).get(dataset) or {}
    meta = package_meta(kb, metrics_dir, str(described.get("kb", "")), dataset, objective)
    write_text_atomic(output, srsly.json_dumps(meta, indent=2) + "\n")
    msg.good(f"Wrote {output}: {len(meta['performance'])} measured metrics, KB of "
             f"{meta['kb']['entities']} entities")
