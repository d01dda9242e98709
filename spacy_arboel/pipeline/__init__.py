"""The pipeline operations behind the commands, for use from Python: load a pipeline with
config overrides, find its components by factory, swap its KB or its mention encoder,
build a linker's index, merge arbo_coref's settings, cluster a corpus, fill a training config.
The commands parse arguments and call these (as spaCy's ``evaluate_cli`` calls
``evaluate``).

Names are imported from their modules on first use, so that the command line starts
without torch."""

from importlib import import_module
from typing import Any

_MODULES = {
    "..factories": ("COREF", "ENTITY_LINKER", "KB_FACTORIES", "LINKER", "LINKER_FACTORIES",
                   "NER", "RERANKER", "component_factories", "find_component", "find_components",
                   "pipeline_kb"),
    "clustering": ("ClusteredDocs", "cluster_docs", "discovered_clusters"),
    "coref_settings": ("linked_corpus_settings", "load_with_coref",
                       "merge_coref_settings", "read_tuned_settings"),
    "configs": ("factory_defaults", "fill_components", "init_config"),
    "indexes": ("build_linker_index",),
    "knowledge_bases": ("clear_coref_memory", "kb_holders", "swap_kb", "without_kb_paths"),
    "loading": ("load_pipeline", "pipeline_config", "save_pipeline", "save_with_setting"),
    "mention_encoders": ("distill_mention_encoder", "swap_mention_encoder"),
    "tuning": ("tune_lexical_weight",),
    "zero_shot": ("zero_shot_linker",),
}
_OWNER = {name: module for module, names in _MODULES.items() for name in names}
__all__ = sorted(_OWNER)


def __getattr__(name: str) -> Any:
    if name not in _OWNER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _OWNER[name]
    return getattr(import_module(module if module.startswith(".") else f".{module}",
                                 __name__), name)
