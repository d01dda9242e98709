"""The cluster, evaluate-coref and tune-coref commands on the toy corpus."""

import json

import spacy
from spacy.tokens import DocBin

from spacy_arboel.evaluation.coref_eval import best_setting


def _exits(result, code=0):
    assert result.exit_code == code, result.output
    return result


def test_cluster_writes_cluster_ids_across_buffers(saved_linker, toy_examples, cli):
    _exits(cli("cluster", saved_linker / "gold.spacy", saved_linker / "out.spacy",
               "--model", saved_linker / "pipeline", "--buffer-size", 2,
               "--components.arbo_coref.threshold", -1e9))
    nlp = spacy.blank("xx")
    docs = list(DocBin().from_disk(saved_linker / "out.spacy").get_docs(nlp.vocab))
    assert [len(d.ents) for d in docs] == [len(eg.reference.ents) for eg in toy_examples]
    ids = [d.user_data[("._.", "cluster_id", e.start_char, e.end_char)]
           for d in docs for e in d.ents]
    # λ below every edge: each mention is its own discovered cluster, linked to NIL
    assert len(set(ids)) == len(ids) and all(i.startswith("NIL_") for i in ids)
    assert {e.kb_id_ for d in docs for e in d.ents} == {"NIL"}


def test_evaluate_and_tune(saved_linker, cli):
    _exits(cli("evaluate-coref", saved_linker / "pipeline", saved_linker / "gold.spacy",
               "--output", saved_linker / "m.json", "--components.arbo_coref.k", 2))
    metrics = json.loads((saved_linker / "m.json").read_text())
    assert metrics["settings"]["k"] == 2
    assert "coref_heldout" not in metrics
    (saved_linker / "heldout.json").write_text(json.dumps({"ids": ["D001241"]}))  # aspirin
    _exits(cli("evaluate-coref", saved_linker / "pipeline", saved_linker / "gold.spacy",
               "--output", saved_linker / "h.json", "--heldout", saved_linker / "heldout.json"))
    held = json.loads((saved_linker / "h.json").read_text())
    assert held["coref_heldout"]["n"] == 3  # the three aspirin mentions of the toy corpus
    assert 0 <= held["heldout_nil_rate"] <= 1
    assert metrics["independent"]["in_kb"]["n"] == metrics["clustering"]["in_kb"]["n"] > 0
    assert 0 <= metrics["coref"]["conll_f1"] <= 1
    _exits(cli("tune-coref", saved_linker / "pipeline", saved_linker / "gold.spacy", "--k", 1,
               "--k", 3, "--output", saved_linker / "t.json"))
    tuned = json.loads((saved_linker / "t.json").read_text())
    rows = tuned["rows"]
    assert len(rows) == 2 * 2 * len({r["threshold"] for r in rows})
    eligible = [r["value"] for r in rows if r["accuracy_loss"] <= 0.02 + 1e-9]
    if eligible:
        assert tuned["best"]["value"] == max(eligible)
    else:
        assert tuned["best"]["accuracy_loss"] == min(r["accuracy_loss"] for r in rows)
    assert tuned["best"]["k"] in (1, 3) and tuned["best"]["max_accuracy_loss"] == 0.02
    _exits(cli("tune-coref", saved_linker / "pipeline", saved_linker / "gold.spacy", "--k", 1,
               "--max-accuracy-loss", -1, "--output", saved_linker / "t2.json"))
    free = json.loads((saved_linker / "t2.json").read_text())
    assert free["best"]["value"] == max(r["value"] for r in free["rows"])
    assert free["best"]["max_accuracy_loss"] is None


def test_tuning_keeps_linking_accuracy():
    """A setting with the best CoNLL F1 that costs linking accuracy loses to one within the
    tolerance; with none within it, the least costly wins."""
    rows = [{"value": 0.9, "accuracy_loss": 0.30}, {"value": 0.7, "accuracy_loss": 0.01},
            {"value": 0.8, "accuracy_loss": 0.05}, {"value": 0.6, "accuracy_loss": 0.0}]
    assert best_setting(rows, 0.02) is rows[1]
    assert best_setting(rows, None) is rows[0]
    assert best_setting(rows, 0.0) is rows[3]
    assert best_setting(rows[:1] + rows[2:3], 0.02) is rows[2]


def test_add_coref_with_tuned_settings(saved_linker, cli):
    (saved_linker / "t.json").write_text(json.dumps(
        {"best": {"k": 3, "threshold": -0.5, "directed": False}, "rows": []}))
    _exits(cli("add-coref", saved_linker / "pipeline", "--output", saved_linker / "with_coref",
               "--settings", saved_linker / "t.json"))
    nlp = spacy.load(saved_linker / "with_coref")
    assert nlp.pipe_names == ["arbo_entity_linker", "arbo_coref"]
    chosen = nlp.get_pipe("arbo_coref").settings
    assert (chosen.k, chosen.threshold, chosen.directed) == (3, -0.5, False)
    # re-configuring a pipeline that has it already goes through its saved config
    _exits(cli("add-coref", saved_linker / "with_coref", "--components.arbo_coref.k", 5))
    assert spacy.load(saved_linker / "with_coref").get_pipe("arbo_coref").settings.k == 5
    # the workflow's assemble: the linker of a ner's pipeline keeps its candidates (clusters)
    _exits(cli("add-coref", saved_linker / "with_coref", "--output", saved_linker / "assembled",
               "--components.arbo_entity_linker.get_candidates.type_rule", "clusters"))
    assembled = spacy.load(saved_linker / "assembled")
    assert assembled.get_pipe("arbo_entity_linker").get_candidates.type_rule == "clusters"
    assert spacy.load(saved_linker / "with_coref").get_pipe(
        "arbo_entity_linker").get_candidates.type_rule == "restrict"
