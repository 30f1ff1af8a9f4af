"""Speaker diarization: who spoke when (voice activity, windowed speaker embeddings, clustering, RTTM).

Example:
    >>> from speechkit.diarization import Diarizer, write_rttm                     # doctest: +SKIP
    >>> turns = Diarizer(SpeakerRecognition.from_hparams("model")).diarize_file("a.wav")  # doctest: +SKIP
    >>> write_rttm("a.rttm", {"a": turns})                                          # doctest: +SKIP
"""
from speechkit.data.rttm import format_rttm, read_rttm, write_rttm
from speechkit.diarization.clustering import agglomerative_clustering, spectral_clustering
from speechkit.diarization.overlap import OverlapDetector, second_speakers
from speechkit.diarization.pipeline import Diarizer
from speechkit.diarization.trained_vad import FrameVAD, TrainedVAD, train_frame_vad
from speechkit.diarization.vad import energy_vad

__all__ = ["Diarizer", "FrameVAD", "OverlapDetector", "TrainedVAD", "agglomerative_clustering", "energy_vad",
           "format_rttm", "read_rttm", "second_speakers", "spectral_clustering", "train_frame_vad",
           "write_rttm"]
