"""Where one line of prose splits into sentences (English and Portuguese).

A sentence ends at ``.``, ``!``, ``?`` or an ellipsis followed by whitespace; closing
quotes, brackets and emphasis marks after it stay with the sentence that ends
(``(It timed out.)``, ``"Always!"``). What follows may start with any word: a lowercase
one, a quote, a bracket, a digit, an accented capital (``É``, ``«Configurações»``).
Not an end:

* a title or Latin abbreviation (``Dr.``, ``Mr.``, ``Sra.``, ``cf.``, ``vs.``,
  ``incl.``), whatever follows;
* a dotted abbreviation (``e.g.``, ``i.e.``, ``a.m.``, ``U.S.``), unless a common
  sentence opener follows (``at 10 a.m. The room…``, ``the F.A.Q. Then…``; never after
  ``e.g.`` and ``i.e.``);
* an initial (one capital letter) at the sentence's start, after a capitalised word or
  another initial, or before another initial (``J. Smith``, ``K. M. Lang``, ``by J. K.
  Rowling``), whatever follows; after a lowercase word a lone capital is a word and
  ends the sentence before a capital or a digit (``vitamin D. These…``, ``option A.
  The…``, but ``of E. coli``);
* an abbreviation that is also a word or precedes a number or a phrase (``No. 5``,
  ``fig. 3``, ``p. 12``, ``p. ex.``, ``et al.``, ``Acme Inc.``, ``Ltda.``, ``max.``),
  unless a capital follows;
* a number, ``etc.`` or an ellipsis followed by a lowercase word (``step 1. then``,
  ``wait… then``): those end a sentence only before a capital or a digit.

Dots with no space after them never split: decimals (``3.5``), versions (``v1.2``),
file names (``README.md``), URLs; nor does anything inside a code span (`` `foo?` ``).
A piece with no word in it (``. . .``) joins the sentence before it.
"""

from __future__ import annotations

import re

__all__ = ["split_sentences", "terminal"]

#: Abbreviations (lowercase, no final dot) after which a sentence never ends: titles
#: before a name, and Latin or Portuguese abbreviations before a phrase.
ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "dr", "dra", "prof", "profa", "sr", "sra", "srta", "jr", "st", "exmo", "exma",
        "vs", "cf", "approx", "aprox", "ex", "obs", "esp", "incl", "resp",
    }
)
#: Abbreviations that also are words (or stand before a number: "No. 5", "fig. 3",
#: "p. 12", "p. ex."): a sentence ends after them only before a capital.
BEFORE_CAPITAL = frozenset(
    {"no", "nos", "nº", "n.º", "p", "pp", "fig", "figs", "vol", "ch", "sec", "eq", "ref", "art", "cap",
     "pág", "pag", "tel", "máx", "mín", "al", "inc", "ltd", "ltda", "co", "corp", "max", "min", "spp", "sp"}
)
#: Ends a sentence only before a capital or a digit (as do numbers: "step 1. then").
_WEAK = frozenset({"etc"})
_OPENING = "\"'“‘«([{*_`¿¡—–-"
_CLOSING = "\"'”’»)]}*_`"
_BOUNDARY = re.compile(r"(?P<end>[.!?…]+)(?P<close>[\"'”’»)\]}*_`]*)(?P<space>\s+)")
_DOTTED = re.compile(r"^(?:[^\W\d_]{1,3}\.)+[^\W\d_]{1,3}$")  # e.g, i.e, a.m, u.s
_NUMBER = re.compile(r"^[\d.,:/]+$")
_CODE = re.compile(r"(`+)[^`]+?\1")
_INITIAL_NEXT = re.compile(r"[\"'“‘«(\[]*[A-Z]\.\s")
_NO_WORD = re.compile(r"^\W*$")
#: Dotted abbreviations that never end a sentence, whatever follows.
_DOTTED_ALWAYS = frozenset({"e.g", "i.e"})
#: Capitalised words that start a sentence after a dotted abbreviation ("a.m. The").
OPENERS = frozenset(
    {
        "the", "this", "these", "that", "those", "there", "then", "it", "its", "we", "our", "he", "she",
        "they", "their", "his", "her", "i", "you", "your", "a", "an", "in", "on", "at", "if", "when",
        "after", "before", "but", "and", "so", "however", "also", "for", "to", "as", "all", "please",
        "o", "os", "um", "uma", "em", "no", "na", "ele", "ela", "eles", "elas", "depois", "então",
        "mas", "se", "não", "é", "isso", "isto", "este", "esta", "por", "para", "quando",
    }
)


def _previous_word(text: str, end: int) -> str:
    """The word just before position ``end`` (opening marks stripped)."""
    start = max(text.rfind(" ", 0, end), text.rfind("\n", 0, end)) + 1
    return text[start:end].lstrip(_OPENING)


def _first_letter(text: str, start: int) -> str:
    """The first character at or after ``start`` that is not an opening mark ("" at the end)."""
    for ch in text[start:]:
        if ch not in _OPENING:
            return ch
    return ""


def _word_after(text: str, start: int) -> str:
    """The word at or after ``start`` (opening marks stripped, up to a non-letter)."""
    match = re.match(r"[\"'“‘«(\[{*_`¿¡]*([^\W\d_]+)", text[start:])
    return match.group(1) if match else ""


def _initial(text: str, raw_start: int, sentence_start: int, after: int) -> bool:
    """Whether the lone capital at ``raw_start`` is an initial (module docstring)."""
    if _INITIAL_NEXT.match(text, after):
        return True
    before = text[sentence_start:raw_start].rstrip()
    if not before.strip(_OPENING):
        return True
    word = _previous_word(text, len(before) + sentence_start)
    return word[:1].isupper()


def _ends(text: str, match: re.Match[str], sentence_start: int) -> bool:
    """Whether the sentence that starts at ``sentence_start`` ends at ``match`` (module
    docstring)."""
    end = match.group("end")
    if "?" in end or "!" in end:
        return True
    following = _first_letter(text, match.end())
    if not following:
        return True
    strong = following.isupper() or following.isdigit()
    if end != ".":  # an ellipsis ("…", "...")
        return strong or not following.isalpha()
    raw = _previous_word(text, match.start())
    word = raw.lower()
    if word in ABBREVIATIONS:
        return False
    if _DOTTED.match(word):
        return word not in _DOTTED_ALWAYS and following.isupper() and _word_after(text, match.end()).lower() in OPENERS
    if len(raw) == 1 and raw.isupper():
        return strong and not _initial(text, match.start() - 1, sentence_start, match.end())
    if word in BEFORE_CAPITAL:
        return following.isupper()
    if word in _WEAK or _NUMBER.match(word):
        return strong
    return True


_PAIRS = {"”": "“", "’": "‘", "»": "«", ")": "(", "]": "[", "}": "{"}


def _wrap_start(text: str) -> int:
    """Where the part closed by ``text``'s last character opens (-1 for no opener)."""
    closer = text[-1]
    opener = _PAIRS.get(closer)
    if opener is None:  # a symmetric mark ('"', '*', '`'): the run before its last occurrence
        at = text.rstrip(closer).rfind(closer)
        while at > 0 and text[at - 1] == closer:
            at -= 1
        return at
    depth = 0
    for at in range(len(text) - 1, -1, -1):
        if text[at] == closer:
            depth += 1
        elif text[at] == opener:
            depth -= 1
            if depth == 0:
                return at
    return -1


def terminal(sentence: str) -> str:
    """The sentence's last character ("" for none), before its closing quotes, brackets
    and emphasis marks only when they wrap the whole sentence or a part a colon
    introduces: ``?`` for ``**Do you ship abroad?**``, ``"Why?"`` and ``He asks: "Why?"``,
    but ``)`` for ``It runs at 2am (why not hourly?)`` or ``Done :)`` and ``"`` for
    ``The dialog asks "Keep it?"``.

    >>> terminal('**Do you ship abroad?**'), terminal('Steps:'), terminal('(done.)'), terminal('Ok (why?)')
    ('?', ':', '.', ')')
    """
    text = sentence.rstrip()
    stripped = text.rstrip(_CLOSING)
    if not stripped or stripped == text:
        return stripped[-1:]
    at = _wrap_start(text)
    before = text[:at].rstrip() if at >= 0 else None
    if before is not None and (not before.strip(_OPENING) or before.endswith(":")):
        return stripped[-1]
    return text[-1]


def split_sentences(line: str) -> list[str]:
    """The sentences of one line of prose (whitespace already collapsed), in order.

    >>> split_sentences("Run the job. then check the logs. See e.g. README.md, v1.2 or 3.5 MB.")
    ['Run the job.', 'then check the logs.', 'See e.g. README.md, v1.2 or 3.5 MB.']
    >>> split_sentences("Posso cancelar? sim, até 7 dias antes! Fale com a Dra. Lima. (Ela responde.) Ok")
    ['Posso cancelar?', 'sim, até 7 dias antes!', 'Fale com a Dra. Lima.', '(Ela responde.)', 'Ok']
    """
    code = [(m.start(), m.end()) for m in _CODE.finditer(line)] if "`" in line else []
    found: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(line):
        if any(a < match.start() < b - 1 for a, b in code):
            continue  # inside a code span
        if _ends(line, match, start):
            _add(found, line[start : match.start("space")].strip())
            start = match.end()
    _add(found, line[start:].strip())
    return found


def _add(found: list[str], piece: str) -> None:
    """Append ``piece``; one with no word in it (``. . .``) joins the sentence before it."""
    if not piece:
        return
    if found and _NO_WORD.match(piece):
        found[-1] = f"{found[-1]} {piece}"
    else:
        found.append(piece)
