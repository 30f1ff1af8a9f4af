"""A short train_log.txt (two epochs, an update line, a test line), for the plot-log tests."""

LOG = """epoch: 1 | stage: train | lr: 0.001 | loss: 2.5 | duration: 10.0s
epoch: 1 | stage: valid | loss: 2.1 | WER: 80.5 | CER: 40 | duration: 1.0s
update: 200 | lr: 0.0004 | accuracy: 0.2
epoch: 2 | stage: train | lr: 0.0005 | loss: 1.5 | duration: 10.0s
epoch: 2 | stage: valid | loss: 1.2 | WER: 50.25 | CER: 20 | duration: 1.0s
stage: test | loss: 1.3 | WER: 52 | CER: 21 | duration: 2.0s
"""
