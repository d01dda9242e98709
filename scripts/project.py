"""``python scripts/project.py COMMAND``: what only this project's ``project.yml`` runs, kept
beside it and out of the ``spacy_arboel`` package (spaCy projects keep such steps in
``scripts/``): ``prepare`` (the toy, BC5CDR and NCBI-disease corpora and KBs), ``train``
(one training step with its dataset's settings from configs/datasets.yml), ``report`` (a
run's metrics as report.md) and ``package-meta`` (a package's meta.json entries)."""

import package_meta  # noqa: F401  (each module adds its command to the app)
import prepare_dataset  # noqa: F401
import project_train  # noqa: F401
import run_report  # noqa: F401
from project_app import app

if __name__ == "__main__":
    app()
