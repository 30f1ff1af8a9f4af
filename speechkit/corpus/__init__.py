"""The built-in synthetic speech corpus: English sentences spoken by several synthetic voices.

Build it with ``speechkit corpus OUTPUT_DIR --size demo`` (or ``tools/make_corpus.py``), or from Python::

    from speechkit.corpus import CorpusConfig, build_corpus
    build_corpus(CorpusConfig("data/corpus", num_train=600, num_valid=100, num_test=100))

See README.md beside this file for the voices, the engines, the sizes, and how it differs from real speech.
"""
from speechkit.corpus.generator import SIZES, CorpusConfig, UtterancePlan, build_corpus, make_plan
from speechkit.corpus.text import make_digit_strings, make_sentences, normalize_text, vocabulary
from speechkit.corpus.voices import ALL_VOICES, ESPEAK_VOICES, EXTRA_VOICES, VOICES, Voice

__all__ = ["SIZES", "CorpusConfig", "UtterancePlan", "build_corpus", "make_plan", "make_digit_strings",
           "make_sentences", "normalize_text", "vocabulary", "VOICES", "EXTRA_VOICES", "ESPEAK_VOICES",
           "ALL_VOICES", "Voice"]
