"""Every number the README and the docs quote has a committed result file behind it (issue 62).

BENCHMARKS.md holds today's rows, one table per task; each row gives its value, its result
file in ``benchmarks/results/``, the key of the value in that file, and the file's command,
date and machine. Here each row is read back from its file. The README and the docs quote a
measured number only as a link to its row (``[0.882](BENCHMARKS.md#untrained-bc5cdr)``): the
number must be that row's, so no two pages give two numbers for one setting, and their prose
(outside code) may hold no other result-like number (a decimal, a percentage or a rate) but
the configuration values allowed below, each with its reason. Relative links of these pages
must lead to a file, and a link's ``#anchor`` to a heading or a row there.

Fast: reads Markdown and JSON only, no model.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "BENCHMARKS.md"
RESULTS = ROOT / "benchmarks" / "results"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NONE = "the file records none"

ROW = re.compile(r'^\| <a id="([a-z0-9-]+)"></a>`([a-z0-9-]+)` \| (.*) \|$')
LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
VALUE = re.compile(r"^(-?\d[\d,]*(?:\.\d+)?)(%?)$")
FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.S | re.M)
DATE = re.compile(r"^(\d{4}-\d\d-\d\d)(?: \(the file: (\d{4}-\d\d-\d\d)\b.*\))?$")

# Result-like: a number with a decimal point (not a version such as 3.11.7 or a section
# such as §4.3), a percentage, or a rate per second.
NUMBER = re.compile(r"(?<![\w.§/#])(\d{1,3}(?:,\d{3})+(?:\.\d+)*|\d+(?:\.\d+)*)(?![\w])"
                    r"(\s?%|\s*(?:mentions|abstracts|docs|rows|pairs|names|steps|queries)/s\b)?")

# Numbers the prose may hold without a citation: settings, not results. Each entry is a
# substring of one page's prose (outside code) and the reason it is not a result; an entry
# that no longer occurs fails `test_every_allowed_number_is_still_there`.
ALLOWED = {
    "README.md": [],  # none: the README's numbers all cite rows
    "docs/usage.md": [
        # the default of `nil_recall`: a setting (docs/components.md's table)
        ("(0.95) of the right links", "a setting's default"),
        # the probabilities two tied candidates get by construction (a softmax of equals)
        ("(0.5 and 0.5 when", "arithmetic of a tie, not a measurement"),
    ],
    "docs/components.md": [
        # `span_threshold`'s default, written beside the setting's name
        ("(0.05; at most", "a setting's default"),
        # `tune-coref --max-accuracy-loss`'s default
        ("(0.02) of in-KB linking accuracy", "a command's default"),
        # `prepare --holdout 0.1`: the share of entities the discovery setting removes
        ("10% of the entities mentioned in test and\n10% of those", "a command's setting"),
    ],
    "docs/training.md": [
        # the version of MONDO's licence
        ("MONDO (CC BY 4.0)", "a licence's version"),
        # `prepare ncbi`'s fallback split: a share of the documents, a setting of the command
        ("the last 10% of the training documents", "a command's setting"),
        # `distill`'s α, `proxy`'s `hard_fraction`: the objectives' defaults
        ("α (0.5)", "a setting's default"),
        ("`hard_fraction` of them hard, 0.5", "a setting's default"),
    ],
    "docs/security.md": [
        # the version of the OBO format whose rule is quoted
        ("as OBO 1.4 allows", "a format's version"),
    ],
}


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split(" | ")]


def _rows() -> dict[str, dict]:
    rows = {}
    for n, line in enumerate(BENCHMARKS.read_text().splitlines(), 1):
        match = ROW.match(line)
        if not match:
            continue
        assert match[1] == match[2], f"BENCHMARKS.md:{n}: anchor and shown id differ"
        cells = _cells(line)
        assert len(cells) == 9, f"BENCHMARKS.md:{n}: {len(cells)} cells, 9 expected"
        _, setting, metric, value, file, key, command, date, machine = cells
        link = LINK.fullmatch(file)
        assert link, f"BENCHMARKS.md:{n}: the result file is no link: {file}"
        key_code = re.fullmatch(r"`([^`]+)`( ×100)?", key)
        assert key_code, f"BENCHMARKS.md:{n}: the key is no `code`: {key}"
        assert match[1] not in rows, f"BENCHMARKS.md:{n}: row id {match[1]} twice"
        rows[match[1]] = dict(line=n, setting=setting, metric=metric, value=value,
                              file=(BENCHMARKS.parent / link[2]).resolve(), key=key_code[1],
                              x100=bool(key_code[2]), command=command, date=date,
                              machine=machine)
    return rows


ROWS = _rows()


def _at(data, key: str):
    for part in key.split("/"):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def _commands(data) -> list[str]:
    """Every command a result file records: the strings under its ``command`` and
    ``commands`` keys (a string, a list or a dict of them), at any depth."""
    found = []

    def walk(node, under_command: bool) -> None:
        if isinstance(node, str):
            if under_command:
                found.append(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(value, under_command or key in ("command", "commands"))
        elif isinstance(node, list):
            for value in node:
                walk(value, under_command)

    walk(data, False)
    return found


def test_benchmarks_has_its_rows_and_each_setting_once():
    """One row per value read, and one row per setting and metric: two rows that said the
    same setting could hold two numbers for it (a row whose setting starts "the same" refers
    to the rows above it)."""
    assert len(ROWS) >= 20
    places, settings = {}, {}
    for row_id, row in ROWS.items():
        place = (row["file"], row["key"])
        assert place not in places, f"{row_id} and {places[place]} read one value"
        places[place] = row_id
        if not row["setting"].startswith("the same"):
            setting = (row["setting"], row["metric"])
            assert setting not in settings, f"{row_id} and {settings[setting]}: one setting"
            settings[setting] = row_id


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_each_row_is_its_result_file(row_id):
    row = ROWS[row_id]
    where = f"BENCHMARKS.md:{row['line']} ({row_id})"
    assert row["file"].is_relative_to(RESULTS) and row["file"].suffix == ".json", where
    assert row["file"].is_file(), f"{where}: no file {row['file']}"
    data = json.loads(row["file"].read_text())
    value = VALUE.match(row["value"])
    assert value, f"{where}: the value {row['value']!r} is no number"
    shown, percent = float(value[1].replace(",", "")), value[2]
    decimals = len(value[1].partition(".")[2])
    measured = _at(data, row["key"])
    assert isinstance(measured, (int, float)) and not isinstance(measured, bool), where
    measured *= 100 if (percent or row["x100"]) else 1
    assert abs(measured - shown) <= 0.5 * 10 ** -decimals + 1e-9, (
        f"{where}: the table says {row['value']}, {row['file'].name} holds {measured}")
    commands = _commands(data)
    command = re.match(r"`([^`]+)`", row["command"])
    assert command, f"{where}: the command is no `code`"
    if commands:
        assert command[1] in commands, f"{where}: {command[1]!r} is none of the file's commands"
    else:
        assert NONE in row["command"], f"{where}: the file records no command: say so"
    date = DATE.match(row["date"])
    assert date, f"{where}: the date {row['date']!r} is no date"
    if "date" in data:
        # a file holds rows run on or before its date; an older row says the file's date
        assert (date[2] or date[1]) == data["date"] and date[1] <= data["date"], where
    else:
        assert date[1] in row["file"].name and not date[2], (
            f"{where}: the file records no date and its name is not of {date[1]}")
    if "machine" in data:
        assert row["machine"] == data["machine"], f"{where}: the file says {data['machine']!r}"
    else:
        assert NONE in row["machine"], f"{where}: the file records no machine: say so"


def _prose(text: str) -> str:
    """``text`` without code (fenced blocks, inline code), HTML comments and tags; line
    numbers kept."""
    def blank(match):
        return "\n" * match[0].count("\n")

    text = FENCE.sub(blank, text)
    text = re.sub(r"<!--.*?-->", blank, text, flags=re.S)
    text = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", lambda m: "`…`" + blank(m), text, flags=re.S)
    return re.sub(r"</?[a-zA-Z][^<>\n]*>", "", text)


def _target(page: Path, target: str) -> tuple[Path, str]:
    path, _, anchor = target.partition("#")
    return ((page.parent / path).resolve() if path else page.resolve()), anchor


def _citations(page: Path):
    """(text, row id, line) of each link of ``page`` to a row of BENCHMARKS.md."""
    text = _prose(page.read_text())
    for match in LINK.finditer(text):
        path, anchor = _target(page, match[2])
        if path == BENCHMARKS and anchor:
            yield match[1], anchor, text[:match.start()].count("\n") + 1


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_quoted_number_is_its_rows(page):
    wrong = []
    for text, anchor, line in _citations(page):
        if anchor not in ROWS:
            headings = _anchors(BENCHMARKS)
            if anchor not in headings:
                wrong.append(f"{line}: no row or heading #{anchor}")
        elif text != ROWS[anchor]["value"]:
            wrong.append(f"{line}: [{text}] cites {anchor}, whose value is {ROWS[anchor]['value']}")
    assert not wrong, f"{page.name}: {wrong}"


def _uncited(page: Path, text: str, tables: bool = True) -> list[str]:
    """The result-like numbers of ``text`` (a page, as written) outside code, outside the
    allowed settings and, with ``tables=False``, outside its tables, that cite no row."""
    name = page.relative_to(ROOT).as_posix()
    for allowed, _reason in ALLOWED.get(name, []):
        text = text.replace(allowed, " ")
    text = _prose(text)
    if not tables:
        text = "\n".join("" if line.startswith("|") else line for line in text.splitlines())

    def keep_link(match):  # a citation goes; another link keeps its text, not its target
        path, anchor = _target(page, match[2])
        return " " if path == BENCHMARKS and anchor in ROWS else match[1]

    text = LINK.sub(keep_link, text)
    found = []
    for match in NUMBER.finditer(text):
        number, unit = match[1], match[2]
        if number.count(".") > 1:
            continue  # a version
        if "." in number or unit:
            line = text[:match.start()].count("\n") + 1
            found.append(f"{line}: {match[0].strip()!r}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_result_number_without_its_row(page):
    found = _uncited(page, page.read_text())
    assert not found, (f"{page.name} quotes numbers that cite no row of BENCHMARKS.md "
                       f"(cite one as [value](BENCHMARKS.md#row-id), or drop them): {found}")


def test_benchmarks_prose_quotes_no_number_outside_its_tables():
    found = _uncited(BENCHMARKS, BENCHMARKS.read_text(), tables=False)
    assert not found, f"BENCHMARKS.md's prose: {found}"


def test_every_allowed_number_is_still_there():
    for name, entries in ALLOWED.items():
        text = (ROOT / name).read_text()
        for allowed, reason in entries:
            assert allowed in text, f"{name}: {allowed!r} ({reason}) is no longer there"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = page.read_text()
    text_no_code = FENCE.sub("", text)
    anchors, seen = set(), {}
    for match in re.finditer(r"^#{1,6} (.+?)\s*#*$", text_no_code, flags=re.M):
        slug = _slug(match[1])
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    anchors.update(re.findall(r'<a (?:id|name)="([^"]+)"', text))
    return anchors


@pytest.mark.parametrize("page", [*PAGES, BENCHMARKS],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_lead_somewhere(page):
    broken = []
    for match in LINK.finditer(_prose(page.read_text())):
        target = match[2]
        if re.match(r"[a-z][a-z+.-]*:", target):
            continue  # https:, mailto:
        path, anchor = _target(page, target)
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target}: no heading or row #{anchor} in {path.name}")
    assert not broken, f"{page.name}: {broken}"
