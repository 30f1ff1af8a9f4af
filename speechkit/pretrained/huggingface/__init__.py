"""Hugging Face ``transformers`` folders read as data and converted into speechkit models and model folders.

- :mod:`~speechkit.pretrained.huggingface.config`: a folder's ``config.json``, read with bounds and checks;
- :mod:`~speechkit.pretrained.huggingface.encoders`: SSL encoders (wav2vec 2.0, HuBERT, WavLM) by model type;
- :mod:`~speechkit.pretrained.huggingface.wav2vec2`: wav2vec 2.0 weights onto speechkit's model;
- :mod:`~speechkit.pretrained.huggingface.whisper`: Whisper folders onto speechkit's Whisper;
- :mod:`~speechkit.pretrained.huggingface.whisper_config_check`: the Whisper settings speechkit supports.
"""
