"""The UMLS reader (``kb.umls``) on made-up rows in the Rich Release Format's layout."""

from __future__ import annotations

import pytest

from spacy_arboel.kb import Entity, KnowledgeBaseError
from spacy_arboel.kb.umls import MRCONSO_COLUMNS, read_umls


def conso(cui: str, lat: str, ts: str, stt: str, ispref: str, sab: str, tty: str, code: str,
          string: str, suppress: str = "N") -> str:
    """One MRCONSO.RRF line: CUI|LAT|TS|LUI|STT|SUI|ISPREF|AUI|SAUI|SCUI|SDUI|SAB|TTY|CODE|
    STR|SRL|SUPPRESS|CVF|."""
    fields = [cui, lat, ts, "L" + cui[1:], stt, "S" + cui[1:], ispref, "A" + code, "", "",
              code, sab, tty, code, string, "0", suppress, "256"]
    assert len(fields) == len(MRCONSO_COLUMNS)
    return "|".join(fields) + "|\n"


MRCONSO = [
    conso("C0010200", "ENG", "S", "PF", "Y", "MSH", "ET", "D003371", "Coughing"),
    conso("C0010200", "ENG", "P", "PF", "Y", "MSH", "MH", "D003371", "Cough"),
    conso("C0010200", "FRE", "P", "PF", "Y", "MSHFRE", "MH", "D003371", "Toux"),
    conso("C0010200", "ENG", "S", "PF", "Y", "MSH", "ET", "D003371", "Tussis", suppress="O"),
    conso("C0010200", "ENG", "S", "PF", "Y", "SNOMEDCT_US", "SY", "49727002", "Cough symptom"),
    conso("C0011849", "ENG", "S", "VO", "N", "MSH", "ET", "D003920", "diabetes mellitus"),
    conso("C0011849", "ENG", "P", "PF", "Y", "MSH", "MH", "D003920", "Diabetes Mellitus"),
    conso("C0000005", "ENG", "S", "PF", "N", "MSH", "PEP", "D012711",
          "(131)I-Macroaggregated Albumin"),
    conso("C0000005", "ENG", "S", "PF", "N", "MSH", "ET", "D012711", "MAA"),
    conso("C0000039", "FRE", "P", "PF", "Y", "MSHFRE", "MH", "D015060",
          "Dipalmitoylphosphatidylcholine"),
]
MRSTY = ["C0010200|T184|A2.2.2|Sign or Symptom|AT32679018|256|\n",
         "C0011849|T047|B2.2.1.2.1|Disease or Syndrome|AT17683839|256|\n",
         "C0011849|T047|B2.2.1.2.1|Disease or Syndrome|AT17683839|256|\n",
         "C0123456|T121|A1.4.1.1.1|Pharmacologic Substance|AT1|256|\n"]
MRDEF = ["C0010200|A0038417|AT38152019||MSH|A sudden,   audible expulsion of air.|N||\n",
         "C0010200|A3352344|AT51344327||NCI|Another definition.|N||\n",
         "C0011849|A0041979|AT38154564||MSH|A suppressed definition.|O||\n",
         "C0011849|A7570938|AT61277473||NCI|A metabolic disorder.|N||\n"]


@pytest.fixture
def release(tmp_path):
    folder = tmp_path / "2025AA"
    folder.mkdir()
    for name, lines in (("MRCONSO.RRF", MRCONSO), ("MRSTY.RRF", MRSTY), ("MRDEF.RRF", MRDEF)):
        (folder / name).write_text("".join(lines), encoding="utf8")
    return folder


def test_concepts_become_entities(release):
    stats: dict = {}
    kb = read_umls(release, stats=stats)
    assert kb.ids == ["C0010200", "C0011849", "C0000005"]  # C0000039 is French only
    # UMLS's preferred row (TS=P, STT=PF, ISPREF=Y) names the concept; French and
    # suppressed (O) rows are left out
    assert kb["C0010200"] == Entity("C0010200", "Cough", "A sudden, audible expulsion of air.",
                                    ("Coughing", "Cough symptom"), ("Sign or Symptom",))
    assert kb["C0011849"].aliases == () and kb["C0011849"].types == ("Disease or Syndrome",)
    assert kb["C0011849"].description == "A metabolic disorder."  # the MSH one suppressed
    # without a preferred row, a source's preferred term type (PEP) names it
    assert kb["C0000005"].name == "(131)I-Macroaggregated Albumin"
    assert kb["C0000005"].aliases == ("MAA",) and kb["C0000005"].types == ()
    assert stats == {"rows": 10, "rows_kept": 7, "entities": 3, "typed": 2, "described": 2}


def test_languages_sources_suppress_types_and_xrefs_are_settings(release):
    kb = read_umls(release, sources=["MSH"], drop_suppressed=(), types="tui", xrefs=True)
    assert kb["C0010200"].aliases == ("Coughing", "Tussis")
    assert kb["C0010200"].types == ("T184",) and kb["C0010200"].xrefs == ("MSH:D003371",)
    assert kb["C0011849"].description == "A suppressed definition."  # a kept source
    assert read_umls(release, sources=["MSH"])["C0011849"].description == ""
    french = read_umls(release, languages=["FRE"])
    assert [(e.id, e.name) for e in french] == [("C0010200", "Toux"),
                                                ("C0000039", "Dipalmitoylphosphatidylcholine")]
    with pytest.raises(KnowledgeBaseError, match=r"\[E236\] .*MRCONSO\.RRF: no entity was "
                                                 r"read \(none of its 10 rows .*GER"):
        read_umls(release, languages=["GER"])
    with pytest.raises(ValueError, match=r"\[E007\] Unknown UMLS types 'cui'"):
        read_umls(release, types="cui")


def test_the_files_may_lie_in_META_and_MRSTY_MRDEF_are_optional(tmp_path):
    (tmp_path / "META").mkdir()
    (tmp_path / "META" / "MRCONSO.RRF").write_text("".join(MRCONSO), encoding="utf8")
    kb = read_umls(tmp_path)
    assert len(kb) == 3 and kb["C0010200"].types == () and kb["C0010200"].description == ""
    with pytest.raises(KnowledgeBaseError, match=r"\[E234\] .*holds no MRCONSO\.RRF"):
        read_umls(tmp_path / "META" / "elsewhere")


@pytest.mark.parametrize("name, line, problem", [
    ("MRCONSO.RRF", MRCONSO[0].replace("|Coughing|", "|Coughing|extra|"), "19 fields, expected 18"),
    ("MRCONSO.RRF", MRCONSO[0].rstrip("|\n") + "\n", "does not end with '|'"),
    ("MRCONSO.RRF", MRCONSO[0].replace("C0010200|", "|", 1), "the CUI field is empty"),
    ("MRCONSO.RRF", MRCONSO[0].replace("|Coughing|", "| |"), "the STR field is empty"),
    ("MRSTY.RRF", "C0010200|T184|Sign or Symptom|\n", "3 fields, expected 6"),
    ("MRDEF.RRF", "C0010200|A1|AT1||MSH|Cough|N|\n", "7 fields, expected 8"),
])
def test_a_malformed_line_is_E233_with_its_file_and_line(release, name, line, problem):
    lines = {"MRCONSO.RRF": MRCONSO, "MRSTY.RRF": MRSTY, "MRDEF.RRF": MRDEF}[name]
    (release / name).write_text("".join(lines[:2]) + line, encoding="utf8")
    with pytest.raises(KnowledgeBaseError,
                       match=rf"\[E233\] .*{name.replace('.', '[.]')}:3: not a line of UMLS's "
                             rf"{name.replace('.', '[.]')} \({problem}\)"):
        read_umls(release)


def test_bytes_that_are_not_utf8_name_the_line(release):
    (release / "MRCONSO.RRF").write_bytes("".join(MRCONSO[:1]).encode() +
                                          MRCONSO[1].encode().replace(b"Cough", b"C\xffugh"))
    with pytest.raises(KnowledgeBaseError, match=r"\[E233\] .*MRCONSO\.RRF:2: "):
        read_umls(release)


@pytest.mark.parametrize("cui, code, reason", [
    ("NIL", "E035", "the entity id 'NIL' is reserved"),
    (" C0000777", "E001", "the id ' C0000777' has whitespace around it"),
    ("C0000777 ", "E001", "the id 'C0000777 ' has whitespace around it"),
])
def test_a_reserved_or_padded_cui_names_its_mrconso_line(release, cui, code, reason):
    """A CUI the KB refuses is reported at the concept's first MRCONSO row (issue 59, 4a),
    not as the concept's place in the KB (``<kb>:3``)."""
    lines = [*MRCONSO[:4], conso(cui, "ENG", "P", "PF", "Y", "MSH", "MH", "D000777", "Odd"),
             *MRCONSO[4:], conso(cui, "ENG", "S", "PF", "Y", "MSH", "ET", "D000777", "Odder")]
    (release / "MRCONSO.RRF").write_text("".join(lines), encoding="utf8")
    with pytest.raises(KnowledgeBaseError) as caught:
        read_umls(release)
    message = str(caught.value)
    assert message.startswith(f"[{code}] {release / 'MRCONSO.RRF'}:5: "), message
    assert reason in message and "<kb>" not in message
