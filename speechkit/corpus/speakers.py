"""Speaker identities of the built-in corpus, for speaker recognition and diarization.

For a speaker recognizer, an *identity* is a voice a listener would tell apart from the others:

* every **vocal-tract warp** of a flite or festival voice is its own identity (``rms``, ``rms-lo``,
  ``rms-hi``, ``rms-lower``, ``rms-higher`` are five identities: pitch and formants move together by up to
  16%, as between two people of one family);
* every **eSpeak NG variant** is one identity whatever its accent (``espeak-us-m3`` and ``espeak-sc-m3`` are
  the identity ``espeak-m3``: the variant sets pitch, formants and voice quality; the accent only the
  pronunciation, which a speaker recognizer should not rely on);
* **engines and their voices** differ: flite's ``rms``, ``slt``, ``awb``, ``kal``, festival's ``ked``.

Splits stay disjoint by *person* (:func:`speechkit.corpus.voices.speaker_of`), a stricter rule than
disjoint identities: no test identity is a warp of a voice heard in training. The default split
(:data:`TEST_SPEAKERS`, :data:`VALID_SPEAKERS`) holds out the flite person ``kal`` (5 identities) and the
eSpeak variants ``m2``, ``m7``, ``f4`` (3 identities, 12 voices) for test, the variants ``m6`` and ``f3``
for validation, and trains on the 4 other persons' 20 warps and 6 eSpeak variants (26 identities).

Example:
    >>> identity_of("rms-lo"), identity_of("espeak-sc-m3"), engine_of("espeak-sc-m3")
    ('rms-lo', 'espeak-m3', 'espeak')
"""
from __future__ import annotations

from speechkit.corpus.voices import ALL_VOICES, speaker_of, voice_by_name
from speechkit.errors import DataError

#: Persons held out for test and for validation by default (every voice of each).
TEST_SPEAKERS = ("kal", "espeak-m2", "espeak-m7", "espeak-f4")
VALID_SPEAKERS = ("espeak-m6", "espeak-f3")


def identity_of(voice_name: str) -> str:
    """The speaker identity of a corpus voice (a name that is no corpus voice is its own identity)."""
    try:
        voice = voice_by_name(voice_name)
    except DataError:
        return voice_name
    return voice.speaker if voice.engine == "espeak" else voice.name


def engine_of(voice_name: str) -> str:
    """The speech engine of a corpus voice, or ``"unknown"`` for a name that is no corpus voice."""
    try:
        return voice_by_name(voice_name).engine
    except DataError:
        return "unknown"


def voices_of(speakers) -> list:
    """Every corpus voice (all warps and accents) of the persons ``speakers``."""
    wanted = set(speakers)
    return [voice.name for voice in ALL_VOICES if voice.speaker in wanted]


def speaker_split(test_speakers=TEST_SPEAKERS, valid_speakers=VALID_SPEAKERS) -> dict:
    """``{"voices", "test_voices", "valid_voices"}``: every corpus voice, and those of the held-out persons.

    Raises:
        DataError: a person unknown to the corpus, or in both held-out lists.
    """
    persons = {voice.speaker for voice in ALL_VOICES}
    for name in list(test_speakers) + list(valid_speakers):
        if name not in persons:
            raise DataError(f"unknown corpus speaker {name!r}; known: {', '.join(sorted(persons))}")
    both = sorted(set(test_speakers) & set(valid_speakers))
    if both:
        raise DataError(f"speakers {both} are held out for both test and valid")
    return {"voices": [voice.name for voice in ALL_VOICES], "test_voices": voices_of(test_speakers),
            "valid_voices": voices_of(valid_speakers)}


#: The fields a manifest row may name its speaker by, in order: the corpus's voice, its speaker, an import's.
SPEAKER_KEYS = ("voice", "spk", "speaker")


def speaker_rows(rows: dict) -> dict:
    """Manifest rows with ``spk`` set to the identity, and ``voice``, ``person`` and ``engine`` fields.

    ``rows`` are a corpus manifest's (``{id: {"wav", "duration", "voice" or "spk", ...}}``) or an imported
    one's (``speaker``, as ``speechkit data import voxceleb`` writes).
    """
    out = {}
    for utt_id, row in rows.items():
        found = [key for key in SPEAKER_KEYS if isinstance(row, dict) and key in row]
        if not found:
            raise DataError(f"item {utt_id!r} has none of {', '.join(SPEAKER_KEYS)} (the speaker)")
        voice = str(row[found[0]])
        out[utt_id] = {**row, "spk": identity_of(voice), "voice": voice, "person": speaker_of(voice),
                       "engine": engine_of(voice)}
    return out


def check_disjoint(splits: dict) -> None:
    """Raise DataError naming the persons two splits share (``splits``: name -> speaker rows)."""
    persons = {name: {row.get("person", row["spk"]) for row in rows.values()}
               for name, rows in splits.items()}
    names = list(persons)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            shared = sorted(persons[first] & persons[second])
            if shared:
                raise DataError(f"splits {first} and {second} share speakers {shared}; speaker recognition "
                                "scores unseen speakers only")
