"""Small helpers shared by the CLI commands: reading corpora, writing reports, saving a
pipeline with a tuned setting."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def use_gpu(gpu_id: int) -> None:
    """Place the pipelines loaded from now on on GPU ``gpu_id`` (spaCy's ``require_gpu``:
    thinc's ops, and so the components' torch modules); -1 leaves them on the CPU. A GPU
    that cannot be used is E246, before anything is loaded."""
    if gpu_id < 0:
        return
    import spacy
    import typer

    from ..errors import Errors

    try:
        spacy.require_gpu(gpu_id)
    except (ValueError, ImportError, RuntimeError) as err:
        raise typer.BadParameter(Errors.E246.format(gpu_id=gpu_id, reason=err),
                                 param_hint="--gpu-id") from None


def read_docs(path: Path, vocab, limit: int = 0) -> list:
    """The docs of a .spacy DocBin, the first ``limit`` only when it is > 0."""
    from spacy.tokens import DocBin

    docs = list(DocBin().from_disk(path).get_docs(vocab))
    return docs[:limit] if limit else docs


def report(metrics: dict[str, Any], output: Path | None, *, title: str, corpus: Path,
           table: tuple[Sequence[str] | None, list] | None = None,
           name: str | None = None, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """Print the metrics as a table that reads on a terminal (``table``'s header and rows,
    else every value of ``metrics`` a row), the warnings recorded beside
    ``corpus`` (``evaluation.report.corpus_warnings``) and how many gold ids were resolved
    through the KB's alternate ids; write ``name``, ``context``
    (what was scored: model, corpus, ...), those warnings and the metrics to ``output`` as
    JSON, and return what was written."""
    from wasabi import msg

    from ..evaluation.report import corpus_warnings, flat_rows, write_json

    header, rows = table if table is not None else (None, flat_rows(metrics))
    widths = len(rows[0]) if rows else 2
    msg.table(rows, header=header, title=title, aligns=("l", *("r",) * (widths - 1)),
              divider=header is not None)
    warnings = corpus_warnings(corpus)
    for warning in warnings:
        msg.warn(warning)
    if metrics.get("gold_ids_resolved"):
        msg.info(f"{metrics['gold_ids_resolved']} gold ids of {corpus} are alternate ids of "
                 "the KB (an alt_id, an obsolete term's replaced_by): scored as the ids of "
                 "their entities")
    written = {**({"name": name} if name else {}), **(context or {}),
               **({"corpus_warnings": warnings} if warnings else {}), **metrics}
    if output:
        write_json(written, output)
        msg.good(f"Wrote {output}")
    return written


def check_corpus(path: Path, limit: int = 0) -> None:
    """Raise E042, E043 or E044 unless some ent of the corpus (its first ``limit`` docs when
    > 0) has a gold id; read without a pipeline, so before loading one."""
    from spacy.vocab import Vocab

    from ..evaluation.gold import check_gold

    check_gold(read_docs(path, Vocab(), limit), str(path))


def save_with_setting(model: Path, overrides: dict[str, Any], key: str, value: Any,
                      output_model: Path) -> None:
    """``spacy_arboel.pipeline.save_with_setting`` (exit with E046 where ``output_model``
    is a folder that is not a pipeline), and say so."""
    from wasabi import msg

    from ..pipeline.loading import save_with_setting as save

    save(model, overrides, key, value, output_model)
    msg.good(f"Saved {output_model} with {key} = {value}")
