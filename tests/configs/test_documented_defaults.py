"""The settings table of docs/components.md states ``arbo_entity_linker``'s defaults as the
factory declares them: a default changed in its one place fails here until the page says it
too."""

import json
import re
from pathlib import Path

import spacy

from spacy_arboel.linking.candidates import CandidatePolicy

PAGE = Path(__file__).resolve().parents[2] / "docs" / "components.md"
ROW = re.compile(r"^\| `(\w+)` \| `([^`]+)`")


def documented_defaults() -> dict[str, str]:
    text = PAGE.read_text()
    table = text[text.index("## Settings"):text.index("## NIL detection")]
    return {m.group(1): m.group(2) for line in table.splitlines() if (m := ROW.match(line))}


def test_the_documented_defaults_are_the_factorys():
    defaults = spacy.blank("xx").get_factory_meta("arbo_entity_linker").default_config
    documented = documented_defaults()
    scalar = {k for k, v in defaults.items() if not isinstance(v, dict)}
    assert scalar <= set(documented), f"undocumented settings: {scalar - set(documented)}"
    wrong = {k: (documented[k], defaults[k]) for k in scalar
             if json.loads(documented[k]) != defaults[k]}
    assert not wrong, f"docs/components.md says (page, factory): {wrong}"


def test_the_documented_candidate_policy_defaults_are_the_cores():
    """``get_candidates``' own table: each setting with ``CandidatePolicy``'s default, and the
    registered function's defaults the same."""
    from dataclasses import fields
    from inspect import signature

    from spacy.util import registry

    documented = documented_defaults()
    declared = {f.name: f.default for f in fields(CandidatePolicy)}
    assert {k: json.loads(documented[k]) for k in declared} == declared
    registered = signature(registry.misc.get("spacy_arboel.candidates.v1")).parameters
    assert {k: p.default for k, p in registered.items()} == declared
    default = spacy.blank("xx").get_factory_meta("arbo_entity_linker").default_config
    assert default["get_candidates"] == {"@misc": "spacy_arboel.candidates.v1"}
