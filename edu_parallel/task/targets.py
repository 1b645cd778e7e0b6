"""What the classifier's learning task asks (lessons 13 and 14), torch-free so that the command
line checks options with it before torch loads; data and scoring are in ``classifier.py``."""

from __future__ import annotations

TASK_LR = 0.2  # plain SGD
TARGET_ACCURACY = 0.80  # held-out accuracy
TARGET_STEPS = 200  # plain synchronous SGD reaches the target within this many steps
