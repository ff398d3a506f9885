"""Datasets for the ports: tensors from numpy, the programs' splits, and local stand-ins for data
that would need a download (MNIST-like digits from scikit-learn), a file the benchmark lacks, or one it
holds but this project does not redistribute (no licence)."""
from __future__ import annotations

import numpy as np
import pandas as pd
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


def colour_digits(size: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10's stand-in: scikit-learn's 8x8 digits (1797 images, 10 classes) upsampled to
    size x size on three colour channels, as 0-255 intensities like CIFAR's raw pixels: each image
    gets its own background colour and a stroke colour 80-176 levels away from it in every channel
    (seeded), and pixel noise (sd 8), so that the class is in the shape, not in the colour. Returns
    (x of shape [N, 3, size, size], y) in scikit-learn's order (the programs' validation_split takes
    the last rows, as Keras does)."""
    x, y = load_digits(return_X_y=True)
    images = torch.as_tensor(x, dtype=torch.float32).reshape(-1, 1, 8, 8) / 16.0
    ink = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False).clamp(0, 1).numpy()
    rng = np.random.default_rng(seed)
    background = rng.uniform(0, 256, (len(x), 3, 1, 1))
    stroke = (background + rng.uniform(80, 176, (len(x), 3, 1, 1))) % 256
    pixels = background + (stroke - background) * ink + rng.normal(0.0, 8.0, (len(x), 3, size, size))
    return np.clip(np.round(pixels), 0, 255), y


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


# Summary statistics of files the benchmark holds but this project does not redistribute (no
# licence; Titanic is Kaggle's data): shares, medians and spreads only, no rows.
_TITANIC_CLASS_SHARE = [0.24, 0.21, 0.55]  # Pclass 1, 2, 3
_TITANIC_AGE_MEAN = [38.2, 29.9, 25.1]  # per class; sd 14, 20% missing
_TITANIC_FARE_MEDIAN = [60.3, 14.25, 8.05]  # per class; at most 512.3292
_TITANIC_CABIN_SHARE = [0.81, 0.09, 0.02]  # a cabin is recorded, per class
_TITANIC_SIBSP = ([0, 1, 2, 3, 4, 5, 8], [0.682, 0.235, 0.031, 0.018, 0.02, 0.006, 0.008])
_TITANIC_PARCH = ([0, 1, 2, 3, 4, 5, 6], [0.761, 0.132, 0.09, 0.006, 0.004, 0.006, 0.001])


def titanic(seed: int = 0, n_train: int = 891, n_test: int = 418) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A stand-in for Kaggle's Titanic train.csv and test.csv as `pd.read_csv(..., index_col=0)`
    reads them: PassengerId as the index, then (Survived, train only) Pclass, Name, Sex, Age, SibSp,
    Parch, Ticket, Fare, Cabin, Embarked with the real files' types, shares and missing values
    (Age 20%, Cabin by class, two Embarked in train, one Fare in test); about 1300 distinct names,
    930 tickets and 190 cabins over both files. Survival follows sex, class and age as in the real
    data (74% of women and 19% of men, 63/47/24% by class), 38% overall."""
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    pclass = rng.choice([1, 2, 3], n, p=_TITANIC_CLASS_SHARE)
    k = pclass - 1
    female = rng.random(n) < 0.35
    age = np.clip(np.round(rng.normal(np.take(_TITANIC_AGE_MEAN, k), 14.0)), 1, 80).astype(float)
    age[rng.random(n) < 0.2] = np.nan
    sibsp, parch = (rng.choice(values, n, p=np.asarray(p) / sum(p)) for values, p in (_TITANIC_SIBSP, _TITANIC_PARCH))
    fare = np.clip(np.round(np.take(_TITANIC_FARE_MEDIAN, k) * rng.lognormal(0.0, 0.8, n), 4), 0.0, 512.3292)
    titles = np.where(female, np.where(rng.random(n) < 0.5, "Mrs.", "Miss."), np.where(age < 14, "Master.", "Mr."))
    surnames = rng.permutation(n)
    names = [f"Surname{s:04d}, {t} Given{i}" for i, (s, t) in enumerate(zip(surnames, titles))]
    tickets = [f"PC {17000 + t}" if c == 1 and t % 3 == 0 else str(100000 + 37 * t)
               for t, c in zip(rng.integers(0, 1800, n), pclass)]
    decks = np.array(list("ABCDEFG"))
    cabin = np.array([f"{decks[d]}{m}" for d, m in zip(rng.integers(0, 7, n), rng.integers(1, 28, n))], dtype=object)
    cabin[rng.random(n) >= np.take(_TITANIC_CABIN_SHARE, k)] = np.nan
    embarked = rng.choice(np.array(["S", "C", "Q"], dtype=object), n, p=[0.725, 0.189, 0.086])
    embarked[rng.choice(n_train, 2, replace=False)] = np.nan
    fare[n_train + rng.integers(0, n_test)] = np.nan
    logit = 2.7 * female - 1.1 * (pclass - 2) - 0.03 * (np.nan_to_num(age, nan=30.0) - 30.0)
    lo, hi = -5.0, 5.0  # the intercept that gives 38% survivors
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if (1 / (1 + np.exp(-(logit + mid)))).mean() < 0.384 else (lo, mid)
    survived = (rng.random(n) < 1 / (1 + np.exp(-(logit + lo)))).astype(np.int64)
    frame = pd.DataFrame({"Survived": survived, "Pclass": pclass, "Name": names,
                          "Sex": np.where(female, "female", "male"), "Age": age, "SibSp": sibsp, "Parch": parch,
                          "Ticket": tickets, "Fare": fare, "Cabin": cabin, "Embarked": embarked},
                         index=pd.RangeIndex(1, n + 1, name="PassengerId"))
    return frame.iloc[:n_train].copy(), frame.iloc[n_train:].drop(columns="Survived")


# 34673164's dataset.csv, per column: median, spread (log-scale for the positive counts, absolute
# otherwise), decimals, and the shift of the second candidate's counties in spreads.
_COUNTY_COLUMNS = [
    (57566, 1.2, 0, "log", 0.0), (37.9, 2.0, 1, "abs", 0.9), (37.9, 2.0, 1, "abs", 0.9),  # a near-copy
    (15.0, 0.6, 1, "log", 0.6), (12.3, 2.7, 1, "abs", -0.7), (12.3, 2.7, 1, "abs", -0.7),  # a near-copy
    (22484, 0.9, 0, "log", 0.0), (19554, 1.4, 0, "log", -0.2), (2.47, 0.07, 2, "abs", 0.7),
    (61.9, 7.5, 1, "abs", 1.2), (17.1, 4.1, 1, "abs", -1.0), (18.1, 6.1, 1, "abs", -0.5),
    (80587, 0.3, 0, "log", 1.0), (-0.09, 1.0, 2, "abs", 1.4), (0.03, 1.0, 2, "abs", 1.4),
    (0.55, 0.2, 2, "abs", 0.5),
]


def counties(seed: int = 0, n_first: int = 4, n_second: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """A stand-in for 34673164's dataset.csv as pandas reads it (its first row taken as the header):
    9 counties, 16 raw columns at the real file's medians, spreads and decimals (populations and
    counts log-normal around tens of thousands, up to hundreds of thousands; ages, shares, incomes,
    standardised scores; columns 2 and 5 near-copies of 1 and 4), and the candidate each voted for:
    the second candidate's counties shifted along the columns that separate them in the real file
    (incomes, the shares, the two scores). Returns (x, label 0/1)."""
    rng = np.random.default_rng(seed)
    y = np.array([0] * n_first + [1] * n_second)
    x = np.empty((len(y), len(_COUNTY_COLUMNS)))
    for j, (centre, spread, decimals, kind, shift) in enumerate(_COUNTY_COLUMNS):
        z = rng.normal(0.0, 1.0, len(y)) + shift * y
        x[:, j] = np.round(centre * np.exp(spread * z) if kind == "log" else centre + spread * z, decimals)
    x[:, 2] = np.where(rng.random(len(y)) < 0.9, x[:, 1], x[:, 2])
    x[:, 5] = np.where(rng.random(len(y)) < 0.9, x[:, 4], x[:, 5])
    return x, y


def threshold_column(n: int = 999, low: int = 15041, high: int = 24988, threshold: int = 20000,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A stand-in for 45442843's dataset.csv as pandas reads it (its first row taken as the header:
    999 rows): one raw integer column uniform in [low, high), the real file's range, and the label 1
    below `threshold` and 0 from it on, as in the real file (about half positive). Returns (x of
    shape [n, 1], label)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(low, high, n).astype(np.float64)
    return x[:, None], (x < threshold).astype(np.int64)
