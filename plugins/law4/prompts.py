"""The fixed prompts of a speculative (llama-server) Law 4 case, shipped so every runner sends the
same bytes. License: the passage below was written for lawbench by its authors (issue 9) and is
dedicated to the public domain (CC0 1.0); it quotes nobody.

    novel  the passage as a prompt to continue: output that is not in the context, where an n-gram
           drafter finds nothing to copy (register D-10: 'novel generation ... gains nothing')
    copy   the passage, then a request to write it out again word for word: output that reuses the
           context, the copy regime of register V-04/V-12 ('edits, refactors, quoting')

    document  the first N characters of the shipped text lawbench scores perplexity on (anchors/texts:
           The Python Language Reference, PSF-2.0, pinned by SHA-256), then one of QUESTIONS: the
           many-questions-one-document shape of register V-10 (prefix caching), whose own
           '~2048-token prompt (wikitext)' and questions are not published

The register's own prompts (its 'edit task', 'novel code', 'novel prose') are not published; an
anchor that uses these says so in its notes.
"""
from __future__ import annotations

PASSAGE = (
    "The lighthouse keeper rose before the gulls each morning and climbed the ninety-one steps "
    "with a lamp in one hand and a notebook in the other. At the top he wrote down the wind, the "
    "colour of the water, the number of boats that had passed in the night, and whether the glass "
    "needed cleaning. Most days the entries were short. The wind came from the west, the water was "
    "grey, two boats had passed, and the glass was clean. Once a year an inspector came out on the "
    "supply boat, read the notebook from the first page to the last, and asked why the keeper wrote "
    "so much about the weather and so little about himself. The keeper said that the weather was "
    "the only thing on the island that changed. The inspector laughed, signed the last page, and "
    "went back to the mainland before the tide turned. That winter a storm broke three panes of the "
    "lantern room, and the keeper wrote, for the first time, a whole page about being afraid."
)

NOVEL = PASSAGE + "\n\nThe next spring,"

COPY = ("Below is a passage. Write it out again exactly as it is, word for word, with no changes "
        "and no comments.\n\nPassage:\n" + PASSAGE + "\n\nThe passage, copied exactly:\n")

PROMPTS = {"novel": NOVEL, "copy": COPY}

# Written for lawbench (CC0 1.0, as the passage above); each differs from the others in its words,
# so a request after another processes only its own question when the server keeps the document.
QUESTIONS = {
    "a": "Question: what does the text above say about how names are bound?\nAnswer:",
    "b": "Question: which statements does the text above describe first?\nAnswer:",
    "c": "Question: summarise the text above in one sentence.\nAnswer:",
}


def document(chars: int, question: str) -> str:
    """The document prompt: the shipped text's first ``chars`` characters, a blank line, a question."""
    from lawbench.engines import shipped_text

    text = shipped_text().read_text(encoding="utf-8")[:chars]
    return f"{text}\n\n{QUESTIONS[question]}"
