"""What a Whisper fine-tuning run needs from a Whisper folder: the model ready to train (dropout, encoder
frozen or not), the prompt its transcripts are taught after, and the text normalisation its WER is scored
with. The run writes the result back with :func:`~speechkit.pretrained.huggingface.whisper.export_whisper`,
a folder :class:`~speechkit.pretrained.WhisperASR`, ``speechkit transcribe`` and ``speechkit serve`` load.

Example:
    >>> folder = load_for_finetuning("openai/whisper-tiny", "save", freeze_encoder=True)  # doctest: +SKIP
    >>> training_prompt(folder, language="en")                                          # doctest: +SKIP
    [50258, 50259, 50359, 50363]
"""
from __future__ import annotations

from typing import Callable, Optional

from speechkit.errors import HparamsError
from speechkit.models.whisper.finetuning import set_dropout
from speechkit.models.whisper.text_normalizer import BasicTextNormalizer, EnglishTextNormalizer
from speechkit.pretrained.huggingface.whisper import WhisperFolder, load_whisper_folder

NORMALIZERS = ("english", "basic", "none")


def load_for_finetuning(source, savedir=None, *, freeze_encoder: bool = False,
                        dropout: Optional[float] = None, attention_dropout: Optional[float] = None,
                        activation_dropout: Optional[float] = None, **fetch_options) -> WhisperFolder:
    """Fetch and build a Whisper folder (a local path, Hub id or URL, as
    :func:`~speechkit.pretrained.huggingface.whisper.load_whisper_folder`) for training: the dropout rates
    set, and with ``freeze_encoder`` the encoder's parameters marked not to learn (speechkit's Brain leaves
    them out of the optimizer and of DistributedDataParallel; only the decoder adapts)."""
    folder = load_whisper_folder(source, savedir, **fetch_options)
    if folder.tokenizer is None:
        raise HparamsError(f"{source}: the Whisper folder has no tokenizer.json (nor vocab.json + "
                           "merges.txt): the transcripts cannot be tokenized")
    set_dropout(folder.model, dropout, attention_dropout, activation_dropout)
    folder.model.encoder.requires_grad_(not freeze_encoder)
    folder.model.encoder.embed_positions.requires_grad_(False)  # fixed sinusoids, never trained
    return folder


def training_prompt(folder: WhisperFolder, language: Optional[str] = None,
                    task: Optional[str] = None) -> list:
    """The tokens every transcript is taught after: ``<|startoftranscript|>``, the language and the task
    (multilingual models), ``<|notimestamps|>``; the same prompt decoding builds for that request.

    Raises:
        HparamsError: a multilingual model without a language (training needs it fixed), or a language or
            task the model does not have.
    """
    generation = folder.generation
    if language is None and generation.lang_to_id and generation.is_multilingual is not False:
        raise HparamsError("language: a multilingual Whisper model is fine-tuned for one language; set it "
                           "(e.g. --language en)")
    try:
        generation.check_request(language, task, timestamps=False)
        return generation.initial_tokens(language, task, timestamps=False)
    except ValueError as error:
        raise HparamsError(f"language/task: {error}") from None


def wer_normalizer(folder: WhisperFolder, kind: str = "english") -> Optional[Callable[[str], str]]:
    """The text normalisation of WER scoring: ``"english"`` (Whisper's English normaliser, with the
    folder's ``normalizer.json`` spellings when it has one), ``"basic"`` (other languages) or ``"none"``."""
    if kind not in NORMALIZERS:
        raise HparamsError(f"wer_normalizer must be one of {', '.join(NORMALIZERS)}, got {kind!r}")
    if kind == "english":
        path = folder.files.get("normalizer.json")
        return EnglishTextNormalizer.from_file(path) if path is not None else EnglishTextNormalizer()
    return BasicTextNormalizer() if kind == "basic" else None


__all__ = ["NORMALIZERS", "load_for_finetuning", "training_prompt", "wer_normalizer"]
