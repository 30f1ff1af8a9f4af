"""Whisper's languages: code -> English name, and the names users type (``"english"``, ``"Flemish"``).

Example:
    >>> language_code("English"), language_code("fr"), language_code("<|de|>")
    ('en', 'fr', 'de')
"""
from __future__ import annotations

from typing import Optional

_TABLE = """en english|zh chinese|de german|es spanish|ru russian|ko korean|fr french|ja japanese|
pt portuguese|tr turkish|pl polish|ca catalan|nl dutch|ar arabic|sv swedish|it italian|id indonesian|
hi hindi|fi finnish|vi vietnamese|he hebrew|uk ukrainian|el greek|ms malay|cs czech|ro romanian|
da danish|hu hungarian|ta tamil|
no norwegian|th thai|ur urdu|hr croatian|bg bulgarian|lt lithuanian|la latin|mi maori|ml malayalam|cy welsh|
sk slovak|te telugu|fa persian|lv latvian|bn bengali|sr serbian|az azerbaijani|sl slovenian|kn kannada|
et estonian|mk macedonian|br breton|eu basque|is icelandic|hy armenian|ne nepali|mn mongolian|bs bosnian|
kk kazakh|sq albanian|sw swahili|gl galician|mr marathi|pa punjabi|si sinhala|km khmer|sn shona|yo yoruba|
so somali|af afrikaans|oc occitan|ka georgian|be belarusian|tg tajik|sd sindhi|gu gujarati|am amharic|
yi yiddish|lo lao|uz uzbek|fo faroese|ht haitian creole|ps pashto|tk turkmen|nn nynorsk|mt maltese|
sa sanskrit|lb luxembourgish|my myanmar|bo tibetan|tl tagalog|mg malagasy|as assamese|tt tatar|haw hawaiian|
ln lingala|ha hausa|ba bashkir|jw javanese|su sundanese|yue cantonese"""

#: code -> name, in the models' token order.
LANGUAGES = dict(entry.strip().split(" ", 1) for entry in _TABLE.replace("\n", "").split("|"))

#: Other names the reference accepts.
ALIASES = {"burmese": "my", "valencian": "ca", "flemish": "nl", "haitian": "ht", "letzeburgesch": "lb",
           "pushto": "ps", "panjabi": "pa", "moldavian": "ro", "moldovan": "ro", "sinhalese": "si",
           "castilian": "es", "mandarin": "zh"}

NAME_TO_CODE = {**{name: code for code, name in LANGUAGES.items()}, **ALIASES}


def language_code(language: str) -> Optional[str]:
    """The code of ``language`` (a code, a ``<|code|>`` token or a name, any case), or None if unknown."""
    text = language.strip().lower()
    if text.startswith("<|") and text.endswith("|>"):
        text = text[2:-2]
    if text in LANGUAGES:
        return text
    return NAME_TO_CODE.get(text)
