"""Whisper against transformers on random models built here: logits, the front end, and the tokens of
greedy and beam search (with and without timestamps, language forced and detected) and of long form."""
import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from speechkit.models.whisper import WhisperFrontEnd  # noqa: E402
from speechkit.models.whisper.transcribe import DecodingOptions, WhisperTranscriber  # noqa: E402
from speechkit.pretrained.huggingface.whisper import export_whisper, load_whisper_folder  # noqa: E402
from tests.helpers.whisper_folders import build_whisper_folder  # noqa: E402

transformers.logging.set_verbosity_error()


def _features(batch: int, mels: int = 80, seed: int = 1) -> torch.Tensor:
    """Features whose items differ as a whole (a per-bin offset), so that a random model's transcripts do."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, mels, 3000, generator=generator) * 0.5
            + torch.randn(batch, mels, 1, generator=generator) * 1.5)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("whisper")
    hf_model, ids = build_whisper_folder(str(path), eos_scale=1.3)
    return str(path), hf_model, ids


@pytest.mark.parametrize("layout", [
    dict(encoder_layers=2, decoder_layers=2, num_mel_bins=80, safe_serialization=True),
    dict(encoder_layers=3, decoder_layers=1, num_mel_bins=128, safe_serialization=False),  # turbo-like
    dict(encoder_layers=1, decoder_layers=3, num_mel_bins=80, heads=2, d_model=32, safe_serialization=True),
])
def test_logits_equal_transformers_on_padded_batches(tmp_path, layout):
    hf_model, _ = build_whisper_folder(str(tmp_path), **layout)
    loaded = load_whisper_folder(str(tmp_path))
    assert loaded.weights_format == ("safetensors" if layout["safe_serialization"] else "bin")
    features = _features(3, layout["num_mel_bins"])
    tokens = torch.randint(0, 300, (3, 9))
    lengths = torch.tensor([9, 5, 2])
    mask = (torch.arange(9)[None] < lengths[:, None]).long()
    with torch.no_grad():
        expected = hf_model(input_features=features, decoder_input_ids=tokens,
                            decoder_attention_mask=mask).logits
        ours = loaded.model(features, tokens, lengths)
    for row, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(ours[row, :length], expected[row, :length], atol=1e-4, rtol=0)
        alone = loaded.model(features[row:row + 1], tokens[row:row + 1, :length])  # batch invariance
        torch.testing.assert_close(alone[0], ours[row, :length], atol=1e-5, rtol=0)


def test_written_folder_loads_in_transformers_with_equal_logits(folder, tmp_path):
    path, hf_model, _ = folder
    loaded = load_whisper_folder(path)
    for weights_format in ("safetensors", "bin"):
        out = export_whisper(loaded, tmp_path / weights_format, weights_format=weights_format)
        again = transformers.WhisperForConditionalGeneration.from_pretrained(out).eval()
        features, tokens = _features(1), torch.tensor([[5, 6, 7]])
        with torch.no_grad():
            torch.testing.assert_close(again(input_features=features, decoder_input_ids=tokens).logits,
                                       hf_model(input_features=features, decoder_input_ids=tokens).logits)
        assert load_whisper_folder(out).weights_format == weights_format


@pytest.mark.parametrize("mels", [80, 128])
def test_front_end_equals_transformers_feature_extractor(mels):
    extractor = transformers.WhisperFeatureExtractor(feature_size=mels)
    generator = torch.Generator().manual_seed(0)
    waves = [torch.randn(16000, generator=generator) * 0.1, torch.randn(45000, generator=generator) * 0.3,
             torch.sin(torch.arange(70000) * 0.05) * 0.5]
    expected = extractor([w.numpy() for w in waves], sampling_rate=16000, return_tensors="pt").input_features
    batch = torch.zeros(3, 70000)
    for row, wave in enumerate(waves):
        batch[row, :wave.numel()] = wave
    ours = WhisperFrontEnd(mels)(batch, torch.tensor([w.numel() for w in waves]))
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)
    long_wave = torch.randn(16000 * 47, generator=generator) * 0.2
    expected = extractor(long_wave.numpy(), sampling_rate=16000, return_tensors="pt", truncation=False,
                         padding="longest").input_features[0]
    torch.testing.assert_close(WhisperFrontEnd(mels).long_form(long_wave), expected, atol=1e-5, rtol=0)


CASES = [  # language, timestamps, beams
    ("en", False, 1), ("fr", True, 1), (None, False, 1), (None, True, 1), ("en", False, 3), ("de", True, 2),
    (None, True, 3),
]


@pytest.mark.parametrize("language,timestamps,beams", CASES)
def test_search_tokens_equal_generate(folder, language, timestamps, beams):
    path, hf_model, ids = folder
    loaded = load_whisper_folder(path)
    transcriber = WhisperTranscriber(loaded.model, loaded.generation, loaded.tokenizer)
    features = _features(4)
    with torch.no_grad():
        expected = hf_model.generate(features, language=language, return_timestamps=timestamps,
                                     num_beams=beams,
                                     max_new_tokens=24, return_dict_in_generate=True,
                                     force_unique_generate_call=True).sequences
    options = DecodingOptions(language=language, timestamps=timestamps, beam_size=beams, max_new_tokens=24)
    ours = transcriber.decode_features(features, [language] * 4, options)
    for row, transcript in enumerate(ours):
        reference = expected[row].tolist()
        prompt = loaded.generation.initial_tokens(language, None, timestamps, reference[1])
        assert reference[:len(prompt)] == prompt
        generated = reference[len(prompt):]
        if ids["eot"] in generated:
            generated = generated[:generated.index(ids["eot"])]
        assert transcript.tokens == generated, (row, transcript.tokens, generated)
        if language is None:
            assert transcript.language == loaded.generation.language_of(reference[1])


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", None])
def test_long_form_tokens_equal_generate(folder, language):
    path, hf_model, ids = folder
    loaded = load_whisper_folder(path)
    transcriber = WhisperTranscriber(loaded.model, loaded.generation, loaded.tokenizer)
    generator = torch.Generator().manual_seed(3)
    wave = torch.cat([torch.randn(16000 * 20, generator=generator) * 0.3,
                      torch.sin(torch.arange(16000 * 25) * 0.03) * 0.5])  # 45 s
    features = transformers.WhisperFeatureExtractor()(wave.numpy(), sampling_rate=16000, return_tensors="pt",
                                                      truncation=False, padding="longest").input_features
    with torch.no_grad():
        expected = hf_model.generate(features, language=language, return_timestamps=True, max_new_tokens=24,
                                     return_segments=True)
    ours = transcriber.transcribe([wave], DecodingOptions(language=language, timestamps=True,
                                                          max_new_tokens=24))[0]
    reference = [segment["tokens"].tolist() for segment in expected["segments"][0]]
    assert [segment.tokens for segment in ours.segments] == reference
    for segment, theirs in zip(ours.segments, expected["segments"][0]):
        assert segment.start == pytest.approx(float(theirs["start"]), abs=1e-6)
        assert segment.end == pytest.approx(float(theirs["end"]), abs=1e-6)


def test_compression_ratio_and_fallback(folder):
    from transformers.models.whisper.generation_whisper import WhisperGenerationMixin

    from speechkit.models.whisper.transcribe import compression_ratio

    path, _, ids = folder
    loaded = load_whisper_folder(path)
    for tokens in ([5, 6, 7] * 30, list(range(300, 360)), [ids["eot"]]):
        expected = WhisperGenerationMixin._retrieve_compression_ratio(torch.tensor(tokens), ids["vocab_size"])
        assert compression_ratio(tokens, ids["vocab_size"]) == pytest.approx(expected)
    transcriber = WhisperTranscriber(loaded.model, loaded.generation, loaded.tokenizer)
    features = _features(2)
    plain = DecodingOptions(language="en", max_new_tokens=24)
    greedy = transcriber.decode_features(features, ["en", "en"], plain)
    assert compression_ratio(greedy[0].tokens, ids["vocab_size"]) > 1.5  # a random model repeats itself
    # Every temperature fails the threshold: the last one's (sampled) transcript is kept.
    fallback = DecodingOptions(language="en", max_new_tokens=24, temperatures=(0.0, 1.0),
                               compression_ratio_threshold=0.5, seed=3)
    sampled = transcriber.decode_features(features, ["en", "en"], fallback)
    assert [t.tokens for t in sampled] != [t.tokens for t in greedy]
    again = transcriber.decode_features(features, ["en", "en"], fallback)
    assert [t.tokens for t in again] == [t.tokens for t in sampled]  # seeded
    # A threshold nothing reaches: no fallback, the greedy transcript.
    kept = DecodingOptions(language="en", max_new_tokens=24, temperatures=(0.0, 1.0),
                           compression_ratio_threshold=1000.0, logprob_threshold=-1000.0)
    assert [t.tokens for t in transcriber.decode_features(features, ["en", "en"], kept)] == \
        [t.tokens for t in greedy]
