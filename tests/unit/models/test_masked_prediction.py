"""HuBERT and BEST-RQ objectives, their targets and k-means: losses against hand-computed values, k-means
deterministic and resumable, BEST-RQ's quantizer frozen through training steps."""
from __future__ import annotations

import math

import pytest
import torch

from speechkit.errors import DataError
from speechkit.models.wav2vec2 import (
    BestRqPretraining,
    ClusterTargets,
    HubertPretraining,
    MaskedPredictionMonitor,
    MiniBatchKMeans,
    RandomProjectionQuantizer,
    Wav2Vec2Config,
    Wav2Vec2Model,
    Wav2Vec2Pretraining,
    fbank_frames,
    mfcc_frames,
)

TINY = dict(conv_channels=(16,) * 7, d_model=16, num_layers=1, num_heads=2, ffn_dim=32, pos_conv_kernel=8,
            pos_conv_groups=4, final_dim=2, mask_prob=0.5, mask_length=2, dropout=0.0, attention_dropout=0.0,
            feature_dropout=0.0, layer_drop=0.0, feature_penalty_weight=10.0)


def batch(seed=0, lengths=(4000, 3200)):
    generator = torch.Generator().manual_seed(seed)
    wav = torch.randn(len(lengths), max(lengths), generator=generator)
    lengths = torch.tensor(lengths)
    return wav * (torch.arange(wav.shape[1]) < lengths[:, None]), lengths


def test_hubert_loss_equals_the_hand_computed_cross_entropy():
    config = Wav2Vec2Config(**TINY)
    model = HubertPretraining(config, num_clusters=2).eval()
    with torch.no_grad():  # every frame projects to (1, 0); cluster 0 embeds as (2, 0), cluster 1 as (0, 3)
        model.final_proj.weight.zero_()
        model.final_proj.bias.copy_(torch.tensor([1.0, 0.0]))
        model.label_embeddings.copy_(torch.tensor([[2.0, 0.0], [0.0, 3.0]]))
    wav, lengths = batch()
    frames = model.wav2vec2.output_lengths(lengths)
    mask = torch.zeros(2, int(frames.max()), dtype=torch.bool)
    mask[0, [1, 2, 5]] = True
    mask[1, [0, 3]] = True
    targets = torch.zeros(2, mask.shape[1], dtype=torch.long)
    targets[0, 2] = 1
    targets[1, 3] = 1  # masked frames: three of cluster 0, two of cluster 1
    out = model(wav, lengths, targets=targets, mask=mask)
    # Cosines (1, 0) / temperature 0.1 -> logits (10, 0): -log softmax is log(1 + e^-10) for cluster 0 and
    # 10 + log(1 + e^-10) for cluster 1.
    expected_sum = 3 * math.log1p(math.exp(-10)) + 2 * (10 + math.log1p(math.exp(-10)))
    assert out.count.item() == 5 and out.correct.item() == 3
    assert out.prediction_loss.item() == pytest.approx(expected_sum, rel=1e-6)
    penalty = out.feature_penalty.item()
    assert penalty > 0
    assert out.loss.item() == pytest.approx(expected_sum / 5 + 10.0 * penalty, rel=1e-6)


def test_bestrq_loss_equals_the_hand_computed_cross_entropy_and_targets_are_the_quantizers():
    config = Wav2Vec2Config(**TINY)
    model = BestRqPretraining(config, codebook_size=3, code_dim=4, n_mels=20).eval()
    with torch.no_grad():  # logits (2, 0, 0) on every frame
        model.head.weight.zero_()
        model.head.bias.copy_(torch.tensor([2.0, 0.0, 0.0]))
    wav, lengths = batch(1)
    frames = model.wav2vec2.output_lengths(lengths)
    mask = torch.zeros(2, int(frames.max()), dtype=torch.bool)
    mask[0, :4] = True
    mask[1, 2:5] = True
    out = model(wav, lengths, mask=mask)
    features, feature_lengths = fbank_frames(wav, lengths, config, n_mels=20)
    assert torch.equal(feature_lengths, frames)
    codes = model.quantizer(features)[..., 0]
    assert torch.equal(out.targets[0, : frames[0]], codes[0, : frames[0]])
    assert bool((out.targets[1, frames[1]:] == -1).all())
    log_normalizer = math.log(math.exp(2) + 2)
    expected = sum(log_normalizer - (2.0 if code == 0 else 0.0) for code in codes[mask].tolist())
    assert out.prediction_loss.item() == pytest.approx(expected, rel=1e-6)
    assert out.correct.item() == int((codes[mask] == 0).sum())
    assert out.loss.item() == pytest.approx(expected / 7 + 10.0 * out.feature_penalty.item(), rel=1e-6)


def test_random_projection_codes_by_hand():
    quantizer = RandomProjectionQuantizer(input_dim=2, codebook_size=3, code_dim=2, seed=0)
    with torch.no_grad():
        quantizer.projections.copy_(torch.eye(2)[None])
        quantizer.codebooks.copy_(torch.tensor([[[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]]))
    x = torch.tensor([[[5.0, 1.0], [0.1, 3.0], [-2.0, 0.5], [0.0, -4.0]]])
    # Nearest unit codeword of each normalized frame: +x, +y, -x; (0, -1) is 90 degrees from both +x and
    # -x (and 180 from +y): the first of the tied ones, index 0.
    assert quantizer(x)[0, :, 0].tolist() == [0, 1, 2, 0]


def test_bestrq_quantizer_is_fixed_by_its_seed_and_frozen_through_training():
    config = Wav2Vec2Config(**TINY)
    model = BestRqPretraining(config, codebook_size=8, code_dim=4, n_mels=20, quantizer_seed=7)
    other = BestRqPretraining(config, codebook_size=8, code_dim=4, n_mels=20, quantizer_seed=7)
    assert torch.equal(model.quantizer.projections, other.quantizer.projections)
    assert not torch.equal(model.quantizer.codebooks,
                           RandomProjectionQuantizer(20, 8, 4, seed=8).codebooks)
    before = {name: tensor.clone() for name, tensor in model.quantizer.state_dict().items()}
    assert set(before) == {"projections", "codebooks"}  # saved with the model
    assert all(not name.startswith("quantizer.") for name, _ in model.named_parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    wav, lengths = batch(2)
    weights = model.head.weight.detach().clone()
    for step in range(3):
        model(wav, lengths, generator=torch.Generator().manual_seed(step)).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert not torch.equal(model.head.weight, weights)  # training did happen
    for name, tensor in model.quantizer.state_dict().items():
        assert torch.equal(tensor, before[name]), name
    restored = BestRqPretraining(config, codebook_size=8, code_dim=4, n_mels=20, quantizer_seed=0)
    restored.load_state_dict(model.state_dict())
    assert torch.equal(restored.quantizer.codebooks, before["codebooks"])


def test_mfcc_and_fbank_frames_align_with_the_encoder_and_are_batch_invariant():
    config = Wav2Vec2Config(**TINY)
    wav, lengths = batch(3, lengths=(4000, 2500))
    encoder = Wav2Vec2Model(config)
    for make, dim in ((mfcc_frames, 39), (fbank_frames, 80)):
        features, frame_lengths = make(wav, lengths, config)
        assert torch.equal(frame_lengths, encoder.output_lengths(lengths)) and features.shape[-1] == dim
        alone, _ = make(wav[1:, :2500], lengths[1:], config)
        torch.testing.assert_close(features[1, : frame_lengths[1]], alone[0], atol=1e-5, rtol=0)
        assert bool((features[1, frame_lengths[1]:] == 0).all())


def frames_stream(seed, count=6, size=64, dim=3):
    generator = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[0.0, 0.0, 0.0], [5.0, 5.0, 0.0], [0.0, 5.0, 5.0], [5.0, 0.0, 5.0]])
    return [centres[torch.randint(4, (size,), generator=generator)] + 0.3 * torch.randn(size, dim,
                                                                                       generator=generator)
            for _ in range(count)]


def test_kmeans_is_deterministic_per_seed_resumable_and_finds_the_clusters(tmp_path):
    stream = frames_stream(0)
    one = MiniBatchKMeans(4, 3, seed=5)
    for frames in stream:
        one.partial_fit(frames)
    again = MiniBatchKMeans(4, 3, seed=5)
    for frames in stream:
        again.partial_fit(frames)
    assert torch.equal(one.centroids, again.centroids)
    # Stopped after 2 batches, saved, resumed in a fresh object: the same centroids, bit for bit.
    first = MiniBatchKMeans(4, 3, seed=5)
    for frames in stream[:2]:
        first.partial_fit(frames)
    torch.save(first.state_dict(), tmp_path / "kmeans.ckpt")
    resumed = MiniBatchKMeans(4, 3, seed=5)
    resumed.load_state_dict(torch.load(tmp_path / "kmeans.ckpt", weights_only=True))
    for frames in stream[2:]:
        resumed.partial_fit(frames)
    assert torch.equal(resumed.centroids, one.centroids) and int(resumed.batches) == 6
    found = sorted(tuple(round(v) for v in c) for c in one.centroids.tolist())
    assert found == [(0, 0, 0), (0, 5, 5), (5, 0, 5), (5, 5, 0)]
    assert one.inertia(torch.cat(stream)) < 0.5
    # Another seed draws other seeds for k-means++ (frames without clusters, so the fits differ).
    noise = torch.randn(64, 3, generator=torch.Generator().manual_seed(1))
    fits = []
    for seed in (5, 5, 6):
        kmeans = MiniBatchKMeans(4, 3, seed=seed)
        kmeans.partial_fit(noise)
        fits.append(kmeans.centroids)
    assert torch.equal(fits[0], fits[1]) and not torch.equal(fits[0], fits[2])


def test_kmeans_refuses_bad_frames():
    kmeans = MiniBatchKMeans(4, 3)
    with pytest.raises(DataError, match="before any partial_fit"):
        kmeans.predict(torch.zeros(2, 3))
    with pytest.raises(DataError, match="fewer than the 4 clusters"):
        kmeans.partial_fit(torch.zeros(2, 3))
    with pytest.raises(DataError, match=r"frames \(count, 3\)"):
        kmeans.partial_fit(torch.zeros(8, 2))
    with pytest.raises(DataError, match="NaN"):
        kmeans.partial_fit(torch.full((8, 3), float("nan")))


def test_cluster_targets_from_mfccs_and_from_a_teachers_layer():
    config = Wav2Vec2Config(**TINY)
    wav, lengths = batch(4)
    kmeans = MiniBatchKMeans(3, 39, seed=0)
    kmeans.partial_fit(mfcc_frames(wav, lengths, config)[0][0])
    labels, frame_lengths = ClusterTargets(kmeans, config)(wav, lengths)
    assert labels.shape == (2, int(frame_lengths.max())) and bool((labels[1, frame_lengths[1]:] == -1).all())
    assert set(labels[labels >= 0].tolist()) <= {0, 1, 2}
    teacher = Wav2Vec2Model(config)
    teacher_kmeans = MiniBatchKMeans(3, 16, seed=0)
    targets = ClusterTargets(teacher_kmeans, config, teacher=teacher, layer=1)
    features, _ = targets.features(wav, lengths)
    teacher_kmeans.partial_fit(features[0])
    student = HubertPretraining(config, 3, targets)
    student.train()
    assert not targets.training and not teacher.training  # the teacher never drops out or masks
    out = student(wav, lengths, generator=torch.Generator().manual_seed(0))
    out.loss.backward()
    assert all(p.grad is None for p in teacher.parameters())
    expected, _ = targets(wav, lengths)
    assert torch.equal(out.targets, expected)


def test_masked_prediction_monitor_reports_accuracy_and_target_use():
    config = Wav2Vec2Config(**TINY)
    model = BestRqPretraining(config, codebook_size=4, code_dim=4, n_mels=20)
    monitor = MaskedPredictionMonitor(4)
    wav, lengths = batch(5)
    out = model(wav, lengths, generator=torch.Generator().manual_seed(0))
    monitor.update(out)
    summary = monitor.summarize(gather=lambda value: [value])
    assert summary["accuracy"] == pytest.approx(out.correct.item() / out.count.item())
    assert summary["prediction"] == pytest.approx(out.prediction_loss.item() / out.count.item())
    assert 1.0 <= summary["target_perplexity"] <= 4.0
    since = monitor.snapshot()
    monitor.update(out)
    assert monitor.summarize(gather=lambda value: [value], since=since)["prediction"] == pytest.approx(
        summary["prediction"])


def test_the_three_objectives_share_one_encoder_state_layout():
    config = Wav2Vec2Config(**TINY)
    keys = set(Wav2Vec2Model(config).state_dict())
    for model in (Wav2Vec2Pretraining(config), HubertPretraining(config, 5),
                  BestRqPretraining(config, codebook_size=8, n_mels=20)):
        assert set(model.wav2vec2.state_dict()) == keys


def test_wav2vec2_loss_equals_the_hand_computed_contrastive_terms():
    config = Wav2Vec2Config(**{**TINY, "final_dim": 2}, codebook_groups=1, codebook_entries=2,
                            codevector_dim=2, num_negatives=1, quantizer_input_dropout=0.0,
                            diversity_weight=0.1, logit_temperature=0.1)
    model = Wav2Vec2Pretraining(config).eval()  # eval: argmax codes, no Gumbel noise
    with torch.no_grad():
        # Every context projects to (1, 0); the two code vectors project to (1, 0) and (0, 1); a frame gets
        # code 0 where its first normalized feature is positive, else code 1.
        model.project_hid.weight.zero_()
        model.project_hid.bias.copy_(torch.tensor([1.0, 0.0]))
        model.project_q.weight.copy_(torch.eye(2))
        model.project_q.bias.zero_()
        model.quantizer.codevectors.copy_(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]))
        model.quantizer.weight_proj.weight.zero_()
        model.quantizer.weight_proj.weight[0, 0], model.quantizer.weight_proj.weight[1, 0] = 1.0, -1.0
        model.quantizer.weight_proj.bias.zero_()
    wav, lengths = batch(6, lengths=(4000, 4000))
    frames = int(model.wav2vec2.output_lengths(lengths)[0])
    mask = torch.zeros(2, frames, dtype=torch.bool)
    mask[0, [0, 1]] = True
    mask[1, [2, 3]] = True
    negatives = torch.zeros(2, frames, 1, dtype=torch.long)
    negatives[0, 0], negatives[0, 1], negatives[1, 2], negatives[1, 3] = 1, 0, 3, 2
    with torch.no_grad():
        features = model.wav2vec2(wav, lengths, mask=mask).features
        codes = model.quantizer.weight_proj(features).argmax(-1)  # the codes the model will pick
    assert len(set(codes[mask].tolist())) == 2  # both codes among the masked frames: the case is not trivial
    out = model(wav, lengths, mask=mask, negatives=negatives)
    # Cosine of (1, 0) with the target's projected code: 1 for code 0, 0 for code 1; logits over 0.1. A
    # distractor with the target's own code scores -inf (it is the target).
    expected = 0.0
    for item, frame, other in ((0, 0, 1), (0, 1, 0), (1, 2, 3), (1, 3, 2)):
        target, distractor = int(codes[item, frame]), int(codes[item, other])
        score = 10.0 if target == 0 else 0.0
        if distractor == target:
            continue  # softmax over the target alone: -log 1 = 0
        other_score = 10.0 if distractor == 0 else 0.0
        expected += math.log(math.exp(score) + math.exp(other_score)) - score
    assert out.contrastive_loss.item() == pytest.approx(expected, abs=1e-4)
    used = torch.bincount(codes[torch.ones_like(mask)].flatten(), minlength=2).double()
    used = used / used.sum()
    perplexity = math.exp(-sum(p * math.log(p) for p in used.tolist() if p > 0))
    assert out.diversity_loss.item() == pytest.approx((2 - perplexity) / 2, abs=1e-5)
    assert out.loss.item() == pytest.approx(expected / 4 + 0.1 * (2 - perplexity) / 2
                                            + 10.0 * out.feature_penalty.item(), abs=1e-4)


def test_targets_do_not_depend_on_autocast():
    config = Wav2Vec2Config(**TINY)
    wav, lengths = batch(7, lengths=(48000, 40000))
    model = BestRqPretraining(config, codebook_size=1024, code_dim=16, n_mels=80)
    kmeans = MiniBatchKMeans(100, 39, seed=0)
    kmeans.partial_fit(mfcc_frames(wav, lengths, config)[0].reshape(-1, 39))
    targets = ClusterTargets(kmeans, config)
    plain = model.make_targets(wav, lengths), targets(wav, lengths)[0]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under = model.make_targets(wav, lengths), targets(wav, lengths)[0]
    assert torch.equal(plain[0], under[0]) and torch.equal(plain[1], under[1])
