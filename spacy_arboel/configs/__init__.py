"""The training configs of the components, shipped with the package: ``spacy train`` reads
them as they are, ``python -m spacy_arboel init-config`` writes one with a user's paths, and
the project's workflow (``configs/datasets.yml``) names them. No spaCy here."""

from __future__ import annotations

from pathlib import Path

from ..errors import Errors

FOLDER = Path(__file__).parent
# the config of each component factory, by factory name
COMPONENT_CONFIGS = {"arbo_entity_linker": "arbo_entity_linker", "arbo_linker": "arbo_linker",
                     "arbo_reranker": "arbo_reranker"}


def packaged_config(name: str) -> Path:
    """The path of the packaged config ``name`` (``arbo_entity_linker``, ``arbo_linker``,
    ``arbo_linker_passage`` or ``arbo_reranker``; E205 naming them for another)."""
    path = FOLDER / f"{name}.cfg"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in FOLDER.glob("*.cfg")))
        raise ValueError(Errors.E205.format(name=name, known=known))
    return path
