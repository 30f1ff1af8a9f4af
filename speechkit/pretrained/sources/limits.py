"""Size and time limits on what a model folder from a non-local source may cost this machine.

A hostile or broken server can send a 200 MB ``hyperparams.yaml``, stream a file without end, stop sending
in the middle, or write ``!ref`` arithmetic that computes for ever. :class:`SourceLimits` bounds each; pass
your own to ``from_hparams(..., limits=SourceLimits(...))`` for a model that needs more (see
docs/pretrained.md, "Limits"). Local folders are your files and are not limited.

Example:
    >>> limits = SourceLimits(max_yaml_bytes=8 << 20)
    >>> limits.max_yaml_bytes
    8388608
"""
from __future__ import annotations

from dataclasses import dataclass

from speechkit.pretrained.sources.download import DEFAULT_DOWNLOAD_TIMEOUT_S, DEFAULT_STALL_TIMEOUT_S


@dataclass(frozen=True)
class SourceLimits:
    """The bounds applied to a model folder from a Hub repo or a URL.

    Args:
        max_yaml_bytes: largest ``hyperparams.yaml`` (and JSON config) accepted; refused before parsing, and a
            download that passes it stops.
        max_file_bytes: largest weights file accepted when neither the server's ``Content-Length`` nor the
            YAML's ``Pretrainer(sizes=...)`` says how big it is (a stream without end stops here).
        stall_timeout_s: a download whose server sends nothing for this long stops.
        download_timeout_s: a download taking longer than this in all stops (a server dripping bytes).
        max_nesting: deepest nesting of brackets or indentation levels a YAML may have.
        max_value_bits: largest integer (in bits) a ``!ref`` expression may compute or use.
        max_text_chars: longest string a ``!ref`` may build (by interpolation or ``'x' * n``).
        max_reference_steps: most reference look-ups resolving the whole YAML may take.
        max_reference_seconds: longest time resolving the YAML's references may take.
    """

    max_yaml_bytes: int = 4 << 20
    max_file_bytes: int = 16 << 30
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S
    download_timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S
    max_nesting: int = 64
    max_value_bits: int = 4096
    max_text_chars: int = 1 << 20
    max_reference_steps: int = 200_000
    max_reference_seconds: float = 10.0


#: The limits used when the caller gives none.
DEFAULT_LIMITS = SourceLimits()
