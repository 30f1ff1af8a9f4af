"""Pretrained models: fetch files from local folders, the Hugging Face Hub or URLs; load and run models.

Example:
    >>> from speechkit.pretrained import EncoderASR, fetch, FetchSource, FetchFrom
    >>> asr = EncoderASR.from_hparams("org/asr-ctc")          # doctest: +SKIP
    >>> asr.transcribe_file("utt1.flac")                       # doctest: +SKIP
"""
from __future__ import annotations

from speechkit.lazy_exports import lazy_exports

# Imported on first use: fetching needs no torch, so `speechkit fetch` starts fast.
_LAZY = {
    "fetch": "speechkit.pretrained.sources.fetching",
    "FetchFrom": "speechkit.pretrained.sources.fetching",
    "FetchSource": "speechkit.pretrained.sources.fetching",
    "FetchStrategy": "speechkit.pretrained.sources.fetching",
    "ModelSource": "speechkit.pretrained.sources.model_source",
    "Pretrainer": "speechkit.pretrained.pretrainer",
    "LoadReport": "speechkit.pretrained.loading",
    "load_weights": "speechkit.pretrained.loading",
    "Pretrained": "speechkit.pretrained.interfaces",
    "EncoderASR": "speechkit.pretrained.interfaces",
    "EncoderDecoderASR": "speechkit.pretrained.interfaces",
    "register_interface": "speechkit.pretrained.registry",
    "SeparationModel": "speechkit.pretrained.separation",
    "SpeakerRecognition": "speechkit.pretrained.speaker",
    "check_yaml_is_safe": "speechkit.pretrained.safety.guard",
    "Wav2Vec2Features": "speechkit.pretrained.wav2vec2_features",
    "Vocoder": "speechkit.pretrained.vocoder",
    "load_wav2vec2": "speechkit.pretrained.huggingface.wav2vec2",
    "load_encoder": "speechkit.pretrained.huggingface.encoders",
    "export_encoder": "speechkit.pretrained.huggingface.encoders",
    "export_wav2vec2": "speechkit.pretrained.huggingface.wav2vec2",
    "WhisperASR": "speechkit.pretrained.whisper_asr",
    "load_whisper_folder": "speechkit.pretrained.huggingface.whisper",
    "export_whisper": "speechkit.pretrained.huggingface.whisper",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = sorted(_LAZY)
