"""The training configs of the components, shipped with the package: ``spacy train`` reads
them as they are, ``python -m spacy_arboel init-config`` writes one with a user's paths (and
every setting filled in from the factories), and the project's workflow
(``configs/datasets.yml``) names them. A packaged config states a component setting only
where it deliberately differs from the factory's default, listed in ``DEVIATIONS`` with its
reason (``tests/configs/test_packaged_configs.py`` fails on any other difference and on a
default restated). No spaCy here."""

from __future__ import annotations

from pathlib import Path

from ..errors import Errors

FOLDER = Path(__file__).parent
# the config of each component factory, by factory name
COMPONENT_CONFIGS = {"arbo_entity_linker": "arbo_entity_linker", "arbo_linker": "arbo_linker",
                     "arbo_reranker": "arbo_reranker"}

# per packaged config: each component setting that differs from its default (the factory's,
# or the architecture's a block names), and why
DEVIATIONS = {
    "arbo_linker_passage": {
        "components.arbo_linker.model.@architectures":
            "the ablation this config exists for: EntQA / BEER²'s passage reader "
            "(RetrieverReader.v1) instead of the one-pass span reader",
        "components.arbo_linker.passage_length":
            "the passage reader's rows were measured over 32-wordpiece passages (one reader "
            "pass per passage and candidate: 128 costs 4x per pass; BENCHMARKS.md)",
        "components.arbo_linker.passage_stride": "passages overlap by 8 wordpieces at length 32",
        "components.arbo_linker.threshold":
            "tuned on dev for the joint reader's p_span x p_rank (0.03, the paper's; the span "
            "reader's p(m) threshold is 0.3)",
        "components.arbo_linker.max_span_length": "spans fit a 32-wordpiece passage",
        "components.arbo_linker.batch_size": "short passages: twice as many per forward pass",
    },
}


def packaged_config(name: str) -> Path:
    """The path of the packaged config ``name`` (``arbo_entity_linker``, ``arbo_linker``,
    ``arbo_linker_passage`` or ``arbo_reranker``; E205 naming them for another)."""
    path = FOLDER / f"{name}.cfg"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in FOLDER.glob("*.cfg")))
        raise ValueError(Errors.E205.format(name=name, known=known))
    return path
