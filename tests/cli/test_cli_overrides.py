"""Config overrides on the command line: parsed as spaCy's commands parse them, a malformed
one refused before any work."""

from click import NoSuchOption


def test_overrides_reach_the_pipeline_and_malformed_ones_are_refused(saved_linker, tmp_path, cli):
    model = saved_linker / "pipeline"
    result = cli("add-coref", model, "--output", tmp_path / "a", "--components.arbo_coref.k", "3",
                 env={"SPACY_CONFIG_OVERRIDES": "--components.arbo_coref.threshold -2"})
    assert result.exit_code == 0, result.output
    assert "k=3 threshold=-2" in result.output
    result = cli("add-coref", model, "--output", tmp_path / "b", "--k", "3")
    # as spaCy's commands: an option without a dot is click's unknown option
    assert result.exit_code == 1 and isinstance(result.exception, NoSuchOption)
    result = cli("add-coref", model, "--output", tmp_path / "c", "components.arbo_coref.k", "3")
    assert result.exit_code == 1 and "E211" in result.output
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()
