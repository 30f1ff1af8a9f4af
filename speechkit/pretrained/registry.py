"""The registry of inference interfaces: the name a model folder's ``interface`` key gives -> the class.

Interface modules import this one to register their classes; this module imports none of them
(docs/design.md, layers). The shipped interfaces are listed by the module that defines them and imported
when first looked up, so ``Pretrained.from_hparams`` builds a ``Vocoder`` without the caller importing
:mod:`speechkit.pretrained.vocoder` first.

Example:
    >>> interface_named("SeparationModel", "hyperparams.yaml").__name__
    'SeparationModel'
"""
from __future__ import annotations

import importlib
from typing import Optional

from speechkit.errors import HparamsError

#: class name -> interface class, filled by :func:`register_interface`.
INTERFACES: dict = {}

#: class name -> the module that defines and registers the shipped interface of that name.
SHIPPED_INTERFACES = {
    "EncoderASR": "speechkit.pretrained.interfaces",
    "EncoderDecoderASR": "speechkit.pretrained.interfaces",
    "SeparationModel": "speechkit.pretrained.separation",
    "SpeakerRecognition": "speechkit.pretrained.speaker",
    "Wav2Vec2Features": "speechkit.pretrained.wav2vec2_features",
    "Vocoder": "speechkit.pretrained.vocoder",
}


#: transformers ``model_type`` -> the module and class of the interface that loads such a folder as it is
#: (no ``hyperparams.yaml``), imported when first looked up.
TRANSFORMERS_FOLDER_INTERFACES = {"whisper": ("speechkit.pretrained.whisper_asr", "WhisperASR")}


def interface_for_model_type(model_type) -> Optional[type]:
    """The interface class that loads a transformers folder of ``model_type`` whole, or None."""
    if not isinstance(model_type, str) or model_type not in TRANSFORMERS_FOLDER_INTERFACES:
        return None
    module, name = TRANSFORMERS_FOLDER_INTERFACES[model_type]
    return getattr(importlib.import_module(module), name)


def register_interface(cls: type) -> type:
    """Class decorator: let a model folder's ``interface: <class name>`` build ``cls``."""
    INTERFACES[cls.__name__] = cls
    return cls


def interface_named(name: str, where: str) -> type:
    """The interface class registered as ``name``.

    Raises:
        HparamsError: naming ``where`` (the YAML) and the known interfaces, for an unknown name.
    """
    if isinstance(name, str) and name not in INTERFACES and name in SHIPPED_INTERFACES:
        importlib.import_module(SHIPPED_INTERFACES[name])
    if not isinstance(name, str) or name not in INTERFACES:
        known = sorted(set(SHIPPED_INTERFACES) | set(INTERFACES))
        raise HparamsError(f"{where}: key 'interface' is {name!r}; expected one of {', '.join(known)}")
    return INTERFACES[name]
