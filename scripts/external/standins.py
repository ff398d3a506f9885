"""Datasets for the ports: tensors from numpy, the programs' splits, and local stand-ins for data
that would need a download (MNIST-like digits from scikit-learn) or a file the benchmark lacks."""
from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.nn import functional as F
from torch.utils.data import TensorDataset

Splits = tuple[TensorDataset, TensorDataset]


def tensors(x: np.ndarray, y: np.ndarray, classification: bool) -> TensorDataset:
    """Inputs as float32; targets as class ids (int64) or float32 values."""
    target = torch.as_tensor(np.asarray(y), dtype=torch.int64 if classification else torch.float32)
    return TensorDataset(torch.as_tensor(np.asarray(x), dtype=torch.float32), target)


def split(x: np.ndarray, y: np.ndarray, test_size: float, seed: int, classification: bool) -> Splits:
    """scikit-learn's train_test_split, as the programs call it, as (train, val) datasets."""
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=test_size, random_state=seed)
    return tensors(x_train, y_train, classification), tensors(x_val, y_val, classification)


def digits(size: int = 28, n_val: int = 500) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """MNIST's stand-in: scikit-learn's 8x8 digits (1797 images, 10 classes) upsampled to
    size x size, as 0-255 intensities like MNIST's raw pixels; (x_train, y_train, x_val, y_val)
    with x of shape [N, 1, size, size], the last `n_val` images for validation."""
    x, y = load_digits(return_X_y=True)
    images = torch.as_tensor(x, dtype=torch.float32).reshape(-1, 1, 8, 8) / 16.0
    images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    pixels = (images.clamp(0, 1) * 255).round().numpy()
    return pixels[:-n_val], y[:-n_val], pixels[-n_val:], y[-n_val:]


def tabular(n: int, scales: list[float], seed: int, positive_share: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """A stand-in for a CSV of raw numeric columns with a binary label: column j is a positive
    quantity of typical size scales[j] (log-normal), and the label follows a noisy linear rule on
    the standardised columns, with about `positive_share` positives."""
    rng = np.random.default_rng(seed)
    x = np.asarray(scales) * rng.lognormal(0.0, 0.5, size=(n, len(scales)))
    z = (np.log(x) - np.log(x).mean(0)) / np.log(x).std(0)
    score = z @ rng.normal(0.0, 1.0, len(scales)) + rng.normal(0.0, 0.5, n)
    y = (score > np.quantile(score, 1.0 - positive_share)).astype(np.int64)
    return x, y
