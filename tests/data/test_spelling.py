import pytest

from spacy_arboel.data.spelling import american_spelling


@pytest.mark.parametrize("british, american", [
    ("oestrogen", "estrogen"), ("Oestrogens", "Estrogens"), ("ethinyloestradiol",
                                                             "ethinylestradiol"),
    ("anaemia", "anemia"), ("ISCHAEMIA", "ISCHEMIA"), ("haemolytic-uraemic syndrome",
                                                      "hemolytic-uremic syndrome"),
    ("myxoedema coma", "myxedema coma"), ("angio-oedema", "angio-edema"),
    ("apnoea", "apnea"), ("diarrhoea", "diarrhea"), ("Wilms tumours", "Wilms tumors"),
    ("anaesthesia", "anesthesia"), ("paediatric", "pediatric"), ("coeliac", "celiac"),
    ("foetal", "fetal"), ("caesarean", "cesarean"), ("silver sulphadiazine",
                                                    "silver sulfadiazine"),
    ("aluminium", "aluminum"), ("oesophageal", "esophageal"), ("faecal", "fecal"),
])
def test_british_spellings_become_american(british, american):
    assert american_spelling(british) == american


@pytest.mark.parametrize("text", [
    "angioedema", "aesthetic", "four hours", "algae", "coenzyme A", "Caenorhabditis",
    "tumor", "hemorrhage", "sulfate", "",
])
def test_american_and_other_words_are_left_alone(text):
    assert american_spelling(text) == text
