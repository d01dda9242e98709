"""Threads and processes sharing one pipeline (components/concurrency.py, arbo_coref's
process check)."""

import threading

import pytest
import spacy

from spacy_arboel.extensions import CLUSTER_EXT

TEXTS = ["Aspirin induced cough in patients.", "Fever was caused by aspirin.",
         "Patients with heart failure and acute pain.", "Coughing and pyrexia in patients.",
         "Cardiac failure was induced by the drug.", "Acetylsalicylic acid and fever."]
PATTERNS = [{"label": "Disease", "pattern": w}
            for w in ("cough", "fever", "pain", "pyrexia", "coughing")] + [
    {"label": "Chemical", "pattern": [{"LOWER": "aspirin"}]},
    {"label": "Disease", "pattern": [{"LOWER": {"IN": ["heart", "cardiac"]}},
                                     {"LOWER": "failure"}]}]


def _pipeline(encoder, kb_path):
    nlp = spacy.blank("xx")
    nlp.add_pipe("entity_ruler").add_patterns(PATTERNS)
    nlp.add_pipe("arbo_entity_linker", config={"kb_path": str(kb_path), "top_k": 5,
                                               "model": {"encoder_name": encoder}})
    nlp.add_pipe("arbo_coref")
    nlp.get_pipe("arbo_entity_linker").ensure_ready()
    return nlp


def _links(docs):
    return [[(e.text, e.kb_id_, [(i, round(s, 5)) for i, s in e._.kb_candidates],
              e._.get(CLUSTER_EXT)) for e in doc.ents] for doc in docs]


def test_threads_get_the_results_of_a_sequential_run(tiny_dropout_encoder, toy_kb_path):
    # the encoder has dropout 0.5: a forward pass that another thread put back in training
    # mode changes the candidates at once
    nlp = _pipeline(tiny_dropout_encoder, toy_kb_path)
    expected = _links(nlp.pipe(TEXTS, batch_size=2))
    assert _links(nlp.pipe(TEXTS, batch_size=2)) == expected  # deterministic
    results, errors = [], []

    def work():
        try:
            for _ in range(15):
                results.append(_links(nlp.pipe(TEXTS, batch_size=2)))
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(results) == 60
    assert all(result == expected for result in results)


def test_worker_processes_are_refused_with_arbo_coref(tiny_encoder, toy_kb_path):
    nlp = _pipeline(tiny_encoder, toy_kb_path)
    with pytest.raises(ValueError, match=r"E033.*cluster INPUT OUTPUT"):
        list(nlp.pipe(TEXTS, n_process=2, batch_size=2))
    # without arbo_coref, linking in worker processes is fine and matches one process
    with nlp.select_pipes(disable=["arbo_coref"]):
        single = _links(nlp.pipe(TEXTS, batch_size=2))
        multi = _links(nlp.pipe(TEXTS, batch_size=2, n_process=2))
    assert multi == single
