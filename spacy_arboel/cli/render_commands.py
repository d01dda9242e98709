"""``render``: a displaCy page of what a pipeline links in some documents."""

from pathlib import Path
from typing import Annotated

import typer

from ..outputs import check_outputs, write_text_atomic
from .app import OVERRIDES, app
from .overrides import command_overrides


@app.command("render", context_settings=OVERRIDES)
def render_command(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="A pipeline that links (arbo_linker, or ner "
                                               "+ arbo_entity_linker)", exists=True)],
    input_path: Annotated[Path, typer.Argument(
        help="Documents: .jsonl (\"text\", optional \"id\" and \"spans\"), .pubtator, "
             ".txt (PubTator when it starts with PMID|t|, else plain text), .spacy, a brat "
             "folder, or a folder of such files", exists=True)],
    output: Annotated[Path, typer.Option(help="The HTML page to write")] = Path("page.html"),
    limit: Annotated[int, typer.Option(help="Render the first N documents (0: all)")] = 10,
    kb_url_template: Annotated[str | None, typer.Option(
        help="Link of a kb_id, {} standing for the id (default: MeSH's record page for a "
             "MeSH KB; \"\" or another KB: ids shown without a page)")] = None,
    candidates: Annotated[int, typer.Option(
        help="Candidates shown in each entity's tooltip")] = 3,
    errors: Annotated[Path | None, typer.Option(
        help="Write the wrong and missed links of the rendered docs (where INPUT_PATH has "
             "gold ids) to this JSON file; the workflow's report lists them")] = None,
) -> None:
    """Write displaCy's entity view of the linked documents: each entity's label and
    kb_id (a link to its KB page), and its top candidates with their scores as a tooltip.
    Extra --section.key value options override the pipeline's config."""
    from dataclasses import asdict
    from itertools import islice

    from wasabi import msg

    from ..data.ids import gold_ids
    from ..evaluation.report import write_json
    from ..factories import pipeline_kb
    from ..pipeline.loading import load_pipeline
    from ..render import check_links, check_url_template, default_url_template, render_page
    from ..spacy_data.gold_ids import resolve_kb_id
    from ..spacy_data.readers import read_corpus_documents

    check_outputs({"MODEL": model, "INPUT_PATH": input_path},
                  {"--output": output, "--errors": errors},
                  kinds={"--output": "html", "--errors": "json"})
    if kb_url_template:
        check_url_template(kb_url_template)
    documents = list(islice(read_corpus_documents(input_path, strict=False),
                            limit if limit > 0 else None))
    nlp = load_pipeline(model, command_overrides(ctx))
    kb = pipeline_kb(nlp)
    names = {e.id: e.name for e in kb} if kb is not None else {}
    if kb_url_template is None:
        kb_url_template = default_url_template(names)
    docs = list(nlp.pipe(d.text for d in documents))
    # gold ids that are alternate ids of the KB are marked as their entities' ids
    golds = [[(start, end, resolve_kb_id(ids, kb)) for start, end, ids in d.gold_links]
             for d in documents]
    page = render_page(docs, kb_url_template or None, names, candidates,
                       [d.id for d in documents], golds)
    write_text_atomic(output, page)
    msg.good(f"Rendered {len(docs)} docs with {sum(len(d.ents) for d in docs)} entities: "
             f"{output}")
    checks = [c for doc, d, gold in zip(docs, documents, golds, strict=True)
              for c in check_links(doc, gold, d.id)]
    if checks:
        wrong = [c for c in checks if c.kind != "right"]
        msg.info(f"{len(checks) - len(wrong)} of {len(checks)} gold links right; "
                 f"{sum(c.kind == 'wrong' for c in wrong)} wrong, "
                 f"{sum(c.kind == 'missed' for c in wrong)} missed (marked on the page)")
    if errors is not None:
        write_json({"gold_links": len(checks), "errors": [
            {**asdict(c), "predicted_name": names.get(c.predicted, ""),
             "gold_name": names.get(gold_ids(c.gold)[0], "")} for c in checks
            if c.kind != "right"]}, errors)
        msg.good(f"Wrote {errors}")
