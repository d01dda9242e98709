"""The datasets' settings of the project (configs/datasets.yml): for each dataset, the
config and overrides of each training step, its KB's description, the vocabularies of
``prepare --synonyms default``, the splits of ``prepare --alias-splits default`` and the
mention normalisers of its linker and re-ranker."""

from pathlib import Path

from project_errors import ProjectErrors
from spacy_arboel.configs import packaged_config
from spacy_arboel.parsing import input_problem

SETTINGS = Path("configs") / "datasets.yml"
# a dataset's entries in SETTINGS that are not training steps: its KB's description (the
# package's meta.json), the vocabularies of `prepare --synonyms default` and the splits whose
# mentions become aliases (`prepare --alias-splits default`; train and dev where not given),
# and the mention normalisers (``normalisers``: none where not given) of the components that
# read mentions into an encoder: set on the steps whose config trains one of them
DATASET_FIELDS = ("kb", "synonyms", "alias_splits", "normalisers")
NORMALISED = {"arbo_entity_linker": "arbo_entity_linker", "arbo_reranker": "arbo_reranker"}


def read_datasets(path: Path) -> dict:
    """The datasets' settings in ``path`` (empty where it holds no mapping; E153 when it
    cannot be read, a missing file or a folder included: a --settings with a typo in its
    path would otherwise give every dataset the defaults)."""
    import srsly

    problem = input_problem(path)
    if problem:
        raise ValueError(ProjectErrors.E153.format(path=path, problem=f"it {problem}"))
    try:
        settings = srsly.read_yaml(path)
    except (OSError, ValueError, RecursionError) as err:  # srsly: ValueError("Invalid YAML")
        raise ValueError(ProjectErrors.E153.format(path=path, problem=err)) from None
    return settings if isinstance(settings, dict) else {}


def dataset_settings(path: Path, step: str, dataset: str) -> tuple[Path, dict]:
    """The config file and the spaCy overrides of ``step`` on ``dataset`` in ``path``
    (E118 where it lacks them): the config beside ``path`` (``configs/ner.cfg``), else the
    one that comes with the package (``spacy_arboel/configs/``; E205 for neither); the
    dataset's ``normalisers`` join the overrides of a step that trains a component reading
    mentions (``NORMALISED``)."""
    settings = read_datasets(path)
    described = settings.get(dataset)
    entry = described.get(step) if isinstance(described, dict) else None
    if not isinstance(entry, dict) or "config" not in entry:
        known = ", ".join(sorted(map(str, settings))) or "none"
        raise ValueError(ProjectErrors.E118.format(path=path, step=step, dataset=dataset,
                                            known=known))
    config = path.parent / f"{entry['config']}.cfg"  # the project's own, else the package's
    if not config.is_file():
        config = packaged_config(entry["config"])
    overrides = dict(entry.get("overrides") or {})
    component = NORMALISED.get(entry["config"])
    if component and described.get("normalisers"):
        overrides.setdefault(f"components.{component}.normalisers",
                             list(described["normalisers"]))
    return config, overrides
