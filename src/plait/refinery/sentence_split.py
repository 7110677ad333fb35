"""Where one line of prose splits into sentences (English and Portuguese).

A sentence ends at ``.``, ``!``, ``?`` or an ellipsis followed by whitespace; closing
quotes, brackets and emphasis marks after it stay with the sentence that ends
(``(It timed out.)``, ``"Always!"``). What follows may start with any word: a lowercase
one, a quote, a bracket, a digit, an accented capital (``É``, ``«Configurações»``).
Not an end:

* a title or Latin abbreviation (``Dr.``, ``Mr.``, ``Sra.``, ``cf.``, ``vs.``) or a
  dotted one (``e.g.``, ``i.e.``, ``a.m.``), whatever follows;
* an initial (``J. Smith``: one capital letter), whatever follows;
* an abbreviation that is also a word or precedes a number (``No. 5``, ``fig. 3``,
  ``p. 12``, ``p. ex.``), unless a capital follows;
* a number, ``etc.`` or an ellipsis followed by a lowercase word (``step 1. then``,
  ``wait… then``): those end a sentence only before a capital or a digit.

Dots with no space after them never split: decimals (``3.5``), versions (``v1.2``),
file names (``README.md``), URLs.
"""

from __future__ import annotations

import re

__all__ = ["split_sentences", "terminal"]

#: Abbreviations (lowercase, no final dot) after which a sentence never ends: titles
#: before a name, and Latin or Portuguese abbreviations before a phrase.
ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "dr", "dra", "prof", "profa", "sr", "sra", "srta", "jr", "st", "exmo", "exma",
        "vs", "cf", "approx", "aprox", "ex", "obs",
    }
)
#: Abbreviations that also are words (or stand before a number: "No. 5", "fig. 3",
#: "p. 12", "p. ex."): a sentence ends after them only before a capital.
BEFORE_CAPITAL = frozenset(
    {"no", "nos", "nº", "n.º", "p", "pp", "fig", "figs", "vol", "ch", "sec", "eq", "ref", "art", "cap",
     "pág", "pag", "tel", "máx", "mín"}
)
#: Ends a sentence only before a capital or a digit (as do numbers: "step 1. then").
_WEAK = frozenset({"etc"})
_OPENING = "\"'“‘«([{*_`¿¡—–-"
_CLOSING = "\"'”’»)]}*_`"
_BOUNDARY = re.compile(r"(?P<end>[.!?…]+)(?P<close>[\"'”’»)\]}*_`]*)(?P<space>\s+)")
_DOTTED = re.compile(r"^(?:[^\W\d_]{1,3}\.)+[^\W\d_]{1,3}$")  # e.g, i.e, a.m, u.s
_NUMBER = re.compile(r"^[\d.,:/]+$")


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


def _ends(text: str, match: re.Match[str]) -> bool:
    """Whether the sentence ends at ``match`` (module docstring)."""
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
    if word in ABBREVIATIONS or _DOTTED.match(word) or (len(raw) == 1 and raw.isupper()):  # or an initial
        return False
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
    found: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(line):
        if _ends(line, match):
            piece = line[start : match.start("space")].strip()
            if piece:
                found.append(piece)
            start = match.end()
    rest = line[start:].strip()
    if rest:
        found.append(rest)
    return found
