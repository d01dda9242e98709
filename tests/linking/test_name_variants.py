"""Name keys: a KB name and its variants in text under one key (plurals, word order,
function words, words the KB's own synonyms make equivalent), nothing ontology-specific."""

import pickle

import pytest

from spacy_arboel.linking.name_variants import NameKeys, Stemmer

STOP = {"of", "the", "a", "back", "and", "or", "are"}


def _names(*entities: list[str]) -> list[list[list[str]]]:
    return [[name.split() for name in entity] for entity in entities]


def test_plurals_word_order_and_function_words_share_a_key():
    keys = NameKeys.learn(_names(["Abnormality of the kidney"], ["Renal cyst"]), STOP)
    assert keys.key("kidney abnormalities".split()) == keys.key(
        "Abnormality of the kidney".split()) == ("abnorm", "kidney")
    assert keys.key("renal cysts".split()) == keys.key(["Renal", "cyst"])
    assert keys.key(["Renal", ",", "cyst"]) == keys.key(["renal", "cyst"])  # signs are no words
    assert keys.key("kidney cysts".split()) != keys.key("renal cyst".split())  # not learnt


def test_synonyms_of_enough_entities_make_two_words_one():
    synonyms = [[f"Renal {organ}", f"Kidney {organ}"] for organ in ("cyst", "tumor", "stone")]
    keys = NameKeys.learn(_names(*synonyms, ["Renal hypoplasia"]), STOP)
    assert keys.key("hypoplastic kidneys".split()) != keys.key("renal hypoplasia".split())
    assert keys.key("kidney hypoplasia".split()) == keys.key("renal hypoplasia".split())
    # two entities vouch for less than min_support (3)
    keys = NameKeys.learn(_names(*synonyms[:2], ["Renal hypoplasia"]), STOP)
    assert keys.key("kidney hypoplasia".split()) != keys.key("renal hypoplasia".split())
    assert NameKeys.learn(_names(*synonyms[:2]), STOP, min_support=2).canonical


def test_one_word_names_and_words_of_one_name_are_never_made_one():
    # single-word synonyms share no word to vouch for them
    one_word = [["Atherosclerosis", "Disease"], ["Arteriosclerosis", "Disease"],
                ["Sclerosis", "Disease"]]
    assert NameKeys.learn(_names(*one_word), STOP).canonical == {}
    # a class word never reads as a one-word name of its class
    shorts = [[f"Short {b}", f"Hypoplastic {b}"] for b in ("nail", "thumb", "rib")]
    keys = NameKeys.learn(_names(*shorts, ["Hypoplastic"]), STOP)
    assert keys.key(["short", "toe"]) == keys.key(["hypoplastic", "toes"])
    assert keys.key(["short"]) != keys.key(["hypoplastic"])
    # two words of one name are two words ("short hypoplastic nail")
    keys = NameKeys.learn(_names(*shorts, ["Short hypoplastic nail"]), STOP)
    assert keys.key(["short", "toe"]) != keys.key(["hypoplastic", "toe"])


def test_a_stop_word_that_tells_entities_apart_is_kept():
    entities = [["Back pain"], ["Pain"], ["Back stiffness"], ["Stiffness"],
                ["Abnormality of the hand"], ["Cleft lip and palate"]]
    keys = NameKeys.learn(_names(*entities), STOP)
    assert "back" not in keys.ignorable and keys.key(["back", "pain"]) != keys.key(["pain"])
    assert {"of", "the", "and"} <= keys.ignorable
    # the words names hold inside them may be inside a span; the others end it
    assert {"of", "the", "and"} >= keys.inner and "are" not in keys.inner


def test_stems_are_the_languages_and_keep_inflammations_apart():
    english = Stemmer("en")
    assert english("Tumours") == english("tumor") and english("cysts") == english("cyst")
    assert english("gingivitis") != english("gingival")  # Snowball alone: both "gingiv"
    assert Stemmer("de")("Nieren") == Stemmer("de")("Niere")
    assert Stemmer("xx")("Kidneys") == "kidneys"  # no stemmer: lowercased only
    again = pickle.loads(pickle.dumps(english))  # a pipeline's processes each have one
    assert again.language == "en" and again("gingivitis") == english("gingivitis")


@pytest.mark.parametrize("language", ["en", "fr", "xx"])
def test_no_names_learn_nothing(language):
    keys = NameKeys.learn([], STOP, language)
    assert keys.canonical == {} and keys.key([]) == ()


def test_one_word_names_read_as_their_plurals_only_and_stop_words_stay_where_alone():
    keys = NameKeys.learn(_names(["Sedatives"], ["Dyskinesia"], ["Factor Nine", "all clear"],
                                 ["Factor"]), STOP | {"nine", "all"})
    assert keys.key(["dyskinesias"]) == keys.key(["Dyskinesia"]) == ("dyskinesia",)
    assert keys.key(["sedation"]) != keys.key(["Sedatives"])  # Snowball alone: both "sedat"
    assert keys.key(["Sedative"]) == keys.key(["sedatives"])
    # one content word among stop words keeps them: "factor nine" is no "factor"
    assert keys.key(["factor", "nine"]) != keys.key(["Factor"]) == ("factor",)
    assert keys.key(["clearly"]) != keys.key(["all", "clear"])
    stem = Stemmer("en")
    assert [stem.light(w) for w in ("Arteries", "glasses", "virus", "pelvis", "cs")] == [
        "arteri", "glass", "virus", "pelvis", "cs"]
