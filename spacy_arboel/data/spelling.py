"""British spellings of medical and chemical words in their American form.

"oestrogen", "anaemia", "ischaemia", "apnoea", "tumour", "sulphate": MeSH, MONDO and most
biomedical KBs spell their names the American way, and a wordpiece encoder splits the
British form into other pieces ("oes ##tro ##gen" against "estrogen"), so a mention is read
in American spelling before it is encoded. The rules are the regular British-American
correspondences of medical English (-aem-, -aesth-, paed-, oedema, oestr-, oesoph-, -rrhoea,
-pnoea, coeliac, foet-, -our, sulph-); each is bounded so that the American words with the
same letters ("angioedema", "aesthetic", "four") are left alone.
"""

from __future__ import annotations

import re

# (pattern, replacement), matched without regard to case; the replacement takes the case
# of the letters it replaces (``_with_case``)
_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), replacement) for pattern, replacement in (
        (r"(?<=[a-z])aem(?=[a-z])", "em"),  # haemorrhage, anaemia, ischaemia, leukaemia
        (r"(?<=[a-z])aesth", "esth"),  # anaesthesia, paraesthesia (not "aesthetic")
        (r"paed", "ped"),  # paediatric, orthopaedic
        (r"gynaec", "gynec"),
        (r"\baetiol", "etiol"),
        (r"faec", "fec"),  # faeces, faecal
        (r"\bcaes", "ces"),  # caesarean, caesium
        (r"(?<![io])oedem", "edem"),  # oedema, myxoedema, angio-oedema (not angioedema)
        (r"oestr", "estr"),  # oestrogen, ethinyloestradiol
        (r"oesoph", "esoph"),
        (r"(?<=rrh)oea", "ea"),  # diarrhoea, amenorrhoea
        (r"(?<=pn)oea", "ea"),  # apnoea, dyspnoea
        (r"coeliac", "celiac"),
        (r"\bfoet", "fet"),  # foetal, foetus
        (r"\b(tum|behavi|col|od|hum|lab|vap)our", r"\1or"),  # tumour, behaviour
        (r"sulph", "sulf"),  # sulphate, sulphonylurea, sulphasalazine
        (r"aluminium", "aluminum"),
    ))


def _with_case(replaced: str, replacement: str) -> str:
    """``replacement`` in the case of the text it replaces (all capitals, a capital first,
    or lower case)."""
    if replaced.isupper() and len(replaced) > 1:
        return replacement.upper()
    if replaced[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def american_spelling(text: str) -> str:
    """``text`` with British spellings of medical words made American ("Ischaemic
    oedema": "Ischemic edema"); other text unchanged."""
    for pattern, replacement in _RULES:
        text = pattern.sub(
            lambda match, r=replacement: _with_case(match.group(0), match.expand(r)), text)
    return text
