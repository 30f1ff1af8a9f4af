"""wav2vec 2.0 on its own: masks and distractors stay out of padding, the encoder is batch invariant, the
quantizer's perplexity and diversity loss are right on inputs whose answer is known, bad settings raise."""
from __future__ import annotations

import math

import pytest
import torch

from speechkit.errors import DataError, HparamsError
from speechkit.models.wav2vec2 import (
    GumbelQuantizer,
    GumbelTemperature,
    Wav2Vec2Config,
    Wav2Vec2Model,
    Wav2Vec2Pretraining,
    contrastive_logits,
    diversity_loss,
    perplexity,
    sample_negatives,
    span_mask,
)
from tests.helpers.batch_invariance import assert_batch_invariant


def tiny(**changes) -> Wav2Vec2Config:
    values = dict(conv_channels=(16, 16, 24), conv_kernels=(10, 3, 3), conv_strides=(5, 2, 2), d_model=24,
                  num_layers=2, num_heads=2, ffn_dim=32, pos_conv_kernel=8, pos_conv_groups=4,
                  codebook_groups=2, codebook_entries=6, codevector_dim=8, final_dim=8, num_negatives=4,
                  mask_prob=0.4, mask_length=3, mask_min_spans=1, layer_drop=0.0)
    values.update(changes)
    return Wav2Vec2Config(**values)


def test_span_masks_cover_only_valid_frames_and_keep_the_rate():
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 200, (300,), generator=generator)
    mask = span_mask(lengths, 220, mask_prob=0.5, mask_length=10, min_spans=1, generator=generator)
    valid = torch.arange(220)[None] < lengths[:, None]
    assert not (mask & ~valid).any()
    assert not mask[lengths < 10].any()  # no whole span fits: nothing masked
    long_items = lengths >= 100
    # Overlapping spans cover a bit less than mask_prob of the frames (1 - e^-0.5 ~ 0.4 without edges).
    rate = (mask[long_items].sum(1) / lengths[long_items]).mean()
    assert 0.3 < float(rate) < 0.5


def test_negatives_are_other_masked_frames_of_the_same_item():
    generator = torch.Generator().manual_seed(1)
    lengths = torch.tensor([40, 25, 9, 3])
    mask = span_mask(lengths, 40, mask_prob=0.6, mask_length=3, min_spans=1, generator=generator)
    mask[3] = False
    mask[3, 1] = True  # one masked frame alone: its only candidate is itself
    negatives = sample_negatives(mask, num_negatives=20, generator=generator)
    for item in range(4):
        for frame in mask[item].nonzero().squeeze(1).tolist():
            drawn = negatives[item, frame]
            assert mask[item, drawn].all(), "a distractor outside the masked (valid) frames"
            if mask[item].sum() > 1:
                assert (drawn != frame).all(), "a frame drawn as its own distractor"
    assert negatives[3, 1].eq(1).all()


def test_padding_content_never_changes_the_pretraining_loss():
    torch.manual_seed(0)
    model = Wav2Vec2Pretraining(tiny(dropout=0.0, attention_dropout=0.0, feature_dropout=0.0,
                                     quantizer_input_dropout=0.0)).train()
    lengths = torch.tensor([3000, 1700, 2200])
    quiet = torch.randn(3, 3000) * (torch.arange(3000)[None] < lengths[:, None])
    noisy = torch.where(torch.arange(3000)[None] < lengths[:, None], quiet, torch.randn(3, 3000) * 100)
    outputs = []
    for wav in (quiet, noisy):
        torch.manual_seed(7)  # the Gumbel noise
        outputs.append(model(wav, lengths, generator=torch.Generator().manual_seed(3)))
    first, second = outputs
    frames = model.wav2vec2.output_lengths(lengths)
    assert not (first.encoder.mask & ~(torch.arange(first.logits.shape[1])[None] < frames[:, None])).any()
    assert int(first.count) > 0 and torch.equal(first.encoder.mask, second.encoder.mask)
    for name in ("loss", "contrastive_loss", "diversity_loss", "feature_penalty", "prob_perplexity"):
        torch.testing.assert_close(getattr(second, name), getattr(first, name), atol=1e-5, rtol=1e-5,
                                   msg=lambda m, name=name: f"{name}: {m}")
    first.loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all()
               for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("feature_norm, layer_norm_first", [("group", False), ("layer", True)])
def test_encoder_is_batch_invariant_at_inference(feature_norm, layer_norm_first):
    torch.manual_seed(0)
    model = Wav2Vec2Model(tiny(feature_norm=feature_norm, layer_norm_first=layer_norm_first)).eval()
    items = [torch.randn(n) for n in (2600, 900, 1800, 1333)]

    def encode(wav, lengths):
        out = model(wav, lengths)
        return out.output, out.lengths

    assert_batch_invariant(encode, items, atol=2e-5)


def test_perplexity_and_diversity_on_known_code_usage():
    groups, entries = 2, 4
    quantizer = GumbelQuantizer(input_dim=groups * entries, groups=groups, entries=entries, codevector_dim=4)
    with torch.no_grad():
        quantizer.weight_proj.weight.copy_(torch.eye(groups * entries) * 50)
        quantizer.weight_proj.bias.zero_()
    quantizer.eval()
    # Frame f picks entry f in both groups: every entry used once.
    x = torch.cat([torch.eye(entries), torch.eye(entries)], dim=1).unsqueeze(0)  # (1, 4 frames, 8)
    out = quantizer(x, torch.ones(1, entries, dtype=torch.bool))
    assert math.isclose(float(out.code_perplexity), groups * entries, rel_tol=1e-5)
    assert abs(float(diversity_loss(out.code_perplexity, groups, entries))) < 1e-5
    # Every frame on entry 0 of each group: one code per group in use.
    same = torch.zeros(1, 5, groups * entries)
    same[..., 0] = same[..., entries] = 1
    collapsed = quantizer(same, torch.ones(1, 5, dtype=torch.bool))
    assert math.isclose(float(collapsed.code_perplexity), groups, rel_tol=1e-5)
    assert math.isclose(float(diversity_loss(collapsed.code_perplexity, groups, entries)), 0.75, rel_tol=1e-5)
    # The frame mask decides which frames count: the collapsed frames masked out leave full usage.
    mixed = torch.cat([x, same], dim=1)
    frame_mask = torch.tensor([[True] * entries + [False] * 5])
    assert math.isclose(float(quantizer(mixed, frame_mask).code_perplexity), groups * entries, rel_tol=1e-5)
    # Training: the soft perplexity of near-one-hot logits matches, and straight-through picks are one-hot.
    quantizer.train()
    soft = quantizer(x, torch.ones(1, entries, dtype=torch.bool))
    assert math.isclose(float(soft.prob_perplexity.detach()), groups * entries, rel_tol=1e-3)
    half = torch.tensor([[[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]])  # exp(ln 2) + exp(0)
    assert math.isclose(float(perplexity(half)), 3.0, rel_tol=1e-6)


def test_temperature_anneals_to_its_floor():
    schedule = GumbelTemperature(2.0, 0.5, 0.999995)
    assert schedule(0) == 2.0 and math.isclose(schedule(100_000), 2.0 * 0.999995 ** 100_000)
    assert schedule(10_000_000) == 0.5
    model = Wav2Vec2Pretraining(tiny(gumbel_temperature=(2.0, 0.5, 0.5)))
    model.set_num_updates(1)
    assert model.quantizer.temperature == 1.0


def test_a_distractor_equal_to_the_target_scores_minus_infinity():
    targets = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    predictions = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]])
    negatives = torch.tensor([[[1, 2], [0, 2], [0, 1]]])
    logits = contrastive_logits(predictions, targets, negatives, temperature=0.5)
    assert logits[0, 0].tolist() == [2.0, float("-inf"), 0.0]  # frame 1's target equals frame 0's
    assert logits[0, 2].tolist() == [2.0, 0.0, 0.0]


def test_bad_settings_and_inputs_raise_clear_errors():
    with pytest.raises(HparamsError, match="feature_norm"):
        Wav2Vec2Config(feature_norm="batch")
    with pytest.raises(HparamsError, match="not divisible by num_heads"):
        Wav2Vec2Config(d_model=100, num_heads=12)
    with pytest.raises(HparamsError, match="no setting 'mask_prb'"):
        Wav2Vec2Config.preset("small", mask_prb=0.5)
    with pytest.raises(HparamsError, match="unknown wav2vec 2.0 preset"):
        Wav2Vec2Config.preset("huge")
    model = Wav2Vec2Model(tiny())
    with pytest.raises(DataError, match="at least 40"):
        model(torch.randn(2, 2000), torch.tensor([2000, 30]))
    with pytest.raises(DataError, match="relative lengths"):
        model(torch.randn(2, 2000), torch.tensor([1.0, 0.5]))
    assert tiny().receptive_field == 40 and tiny().frames_for(2000) == 99
    assert model.output_lengths(torch.tensor([2000, 39, 40])).tolist() == [99, 0, 1]


def test_presets_have_the_published_sizes():
    base, large = Wav2Vec2Config.preset("base"), Wav2Vec2Config.preset("large")
    assert (base.d_model, base.num_layers, base.receptive_field, base.frames_for(16000)) == (768, 12, 400, 49)
    assert (large.d_model, large.num_layers, large.layer_norm_first, large.feature_norm) == (1024, 24, True,
                                                                                              "layer")
    small = Wav2Vec2Pretraining(Wav2Vec2Config.preset("small"))
    assert sum(p.numel() for p in small.parameters()) < 10_000_000


def test_both_group_norm_paths_normalize_each_item_over_its_valid_frames():
    from speechkit.models.wav2vec2.feature_encoder import MaskedGroupNorm

    torch.manual_seed(0)
    norm = MaskedGroupNorm(6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2.0)
        norm.bias.normal_()
    x, lengths = torch.randn(3, 6, 50) * 4 + 2, torch.tensor([50, 31, 7])
    per_item = norm(x, lengths)  # CPU lengths: the fused kernel on each item's frames
    statistics = norm.masked_statistics(x, lengths)  # the path taken when lengths stay on an accelerator
    for index, length in enumerate(lengths.tolist()):
        alone = torch.nn.functional.group_norm(x[index:index + 1, :, :length], 6, norm.weight, norm.bias)
        torch.testing.assert_close(per_item[index, :, :length], alone[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(statistics[index, :, :length], alone[0], atol=1e-5, rtol=1e-5)
    assert per_item[1, :, 31:].abs().sum() == 0


def test_monitor_merges_every_process_and_warns_when_the_codebook_collapses(caplog):
    from types import SimpleNamespace

    from speechkit.models.wav2vec2 import PretrainingMonitor

    def batch(correct, count, code_perplexity):
        scalar = torch.tensor
        return SimpleNamespace(contrastive_loss=scalar(2.0 * count), count=scalar(count),
                               correct=scalar(correct), diversity_loss=scalar(0.5),
                               feature_penalty=scalar(0.1), prob_perplexity=scalar(code_perplexity + 1.0),
                               code_perplexity=scalar(code_perplexity), temperature=1.5)

    monitor = PretrainingMonitor(groups=2, entries=10, collapse_fraction=0.1)
    monitor.update(batch(correct=3, count=10, code_perplexity=12.0))
    monitor.update(batch(correct=1, count=30, code_perplexity=8.0))
    other_rank = {**monitor.sums, "correct": 16.0, "masked": 40.0}  # what a second process adds up

    summary = monitor.summarize(gather=lambda sums: [sums, other_rank])
    assert summary["accuracy"] == pytest.approx(20 / 80)
    assert summary["contrastive"] == pytest.approx(2.0 * 40 * 2 / 80)  # per masked frame
    assert summary["code_perplexity"] == pytest.approx(10.0) and summary["temperature"] == 1.5
    assert "collapsing" not in caplog.text
    monitor.reset()
    monitor.update(batch(correct=0, count=5, code_perplexity=1.5))
    with caplog.at_level("WARNING"):
        monitor.summarize(gather=lambda sums: [sums], stage="valid")
    assert "valid: code perplexity 1.5 is below 10% of the 20 codes" in caplog.text


def test_monitor_summarizes_the_batches_added_since_a_copy_of_its_sums():
    from types import SimpleNamespace

    from speechkit.models.wav2vec2 import PretrainingMonitor

    def batch(correct, count):
        scalar = torch.tensor
        return SimpleNamespace(contrastive_loss=scalar(float(count)), count=scalar(count),
                               correct=scalar(correct), diversity_loss=scalar(0.5),
                               feature_penalty=scalar(0.1), prob_perplexity=scalar(9.0),
                               code_perplexity=scalar(8.0), temperature=1.0)

    monitor = PretrainingMonitor(groups=2, entries=10)
    monitor.update(batch(correct=10, count=10))
    start = dict(monitor.sums)
    monitor.update(batch(correct=1, count=20))
    monitor.update(batch(correct=3, count=20))
    interval = monitor.summarize(gather=lambda sums: [sums], since=start)
    assert interval["accuracy"] == pytest.approx(4 / 40)  # the first batch left out
    assert monitor.summarize(gather=lambda sums: [sums])["accuracy"] == pytest.approx(14 / 50)
