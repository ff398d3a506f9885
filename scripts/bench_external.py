"""Does the diagnosis name the pathologies of training programs other people wrote?

    python scripts/bench_external.py                      # every case of every round (~11 min on 2 cores)
    python scripts/bench_external.py --part dev           # the part rules may be looked at against
    python scripts/bench_external.py --part held-out --no-diagnosis   # train and check the evidence only
    python scripts/bench_external.py --rescore --part dev # re-read the run dirs, train nothing
    python scripts/bench_external.py --round 2 --no-diagnosis   # one round's cases (each round has its own split)
    python scripts/bench_external.py --list

The programs are the buggy Keras programs of the DeepLocalize benchmark (github.com/Wardat-ISU/
DeepLocalize, Benchmark/StackOverflow and Benchmark/GitHub), each beside its fixed twin, ported to
PyTorch in scripts/external/ (docs/external_benchmark.md). Each program trains as
`python train.py ...` in a process of its own (one thread), with the harness's own stability knobs
off (no clip unless the program clips, constant LR, no guard) so it runs as its author ran it.

A buggy run whose pathology did not show in its own metrics is "not reproduced" (REPRODUCED below)
and left out of the sick score; its twin still counts. A reproduced buggy run is named when a
warning or critical finding is in its case's expected set, partial when some other warning or
critical finding fires, missed when none does. A twin is clean with no warning or critical finding,
alarmed otherwise. Results land in --out: results.json and results.md.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from harness.core.metric_names import TRAIN_LOSS, TRAIN_LOSS_FIRST, VAL_ACCURACY, VAL_LOSS  # noqa: E402
from train_process import run_train  # noqa: E402

# seconds per train.py process: so_39217567's fixed run (256000 batch-1 steps) takes ~5 min on a free
# core and took 600 s beside other jobs on 2 cores
RUN_TIMEOUT = 1200.0
SO, GH = "Benchmark/StackOverflow", "Benchmark/GitHub"
# Reproduced, fixed before any diagnosis was read: the buggy run's loss went NaN/Inf and its twin's
# did not; or its best val accuracy is > 2 points below the twin's; or its best val loss is > 10%
# above the twin's (for regression over the variance of the val targets, since a fix may rescale them).
ACCURACY_MARGIN, LOSS_RATIO = 0.02, 1.10
# Every run: the harness's stability knobs off, the port's own initialisers, per-layer monitors, and
# no diagnosis while training (the benchmark diagnoses the run dirs itself).
COMMON = ("data=custom", "clip=null", "schedule=constant", "guard=off", "init=default", "monitor=full",
          "monitor.every=25", "logger=none", "diagnose.report=false", "diagnose.live=false")
# The program scores its own training rows, or draws its inputs from so small a set (integer pairs,
# 3x3 fields, one integer column) that its splits share some: the overlap is its data's, not a leak.
SAME_ROWS = ("diagnose.ignore=[val_train_overlap]",)


def sgd(lr: float = 0.01, momentum: float = 0.0, nesterov: bool = False) -> tuple[str, ...]:
    """Keras' SGD (no weight decay; its `decay=1e-6` lowers the LR by at most 2% over these runs: dropped)."""
    return ("optim=sgd", f"optim.lr={lr}", f"optim.momentum={momentum}", f"optim.nesterov={str(nesterov).lower()}",
            "optim.weight_decay=0")


def adam(lr: float = 1e-3) -> tuple[str, ...]:
    """Keras' Adam: epsilon 1e-7."""
    return ("optim=adam", f"optim.lr={lr}", "optim.eps=1e-7")


def rmsprop(lr: float = 1e-3) -> tuple[str, ...]:
    """Keras' RMSprop: rho 0.9 (torch's alpha), epsilon 1e-7."""
    return ("optim=adam", "optim._target_=torch.optim.RMSprop", "~optim.betas", "~optim.fused", "+optim.alpha=0.9",
            "optim.eps=1e-7", f"optim.lr={lr}")


def run(model: str, batch: int, steps: int, val: int, *extra: str, eval_every: int | None = None) -> tuple[str, ...]:
    """One program's overrides: its model class, batch size, optimizer steps, evals that read all
    `val` validation samples, and anything else."""
    every = eval_every or max(steps // 10, 1)
    return (f"model._target_=external.{model}", f"batch_size={batch}", f"trainer.max_steps={steps}",
            f"trainer.eval_every={every}", f"trainer.eval_batches={math.ceil(val / batch)}",
            f"trainer.ckpt_every={steps}", f"trainer.log_every={min(25, every)}", *extra)


@dataclass(frozen=True)
class Case:
    id: str
    source: str  # the buggy program, in the DeepLocalize repository
    fault: str  # the benchmark's Patch/Fix for it (Benchmark.xlsx), condensed
    task: str
    stand_in: str  # the data the port trains on
    keeps: str  # what the port keeps, and what it changes
    expected: tuple[str, ...]  # findings that name what went wrong; none where the source shows no pathology
    buggy: tuple[str, ...]
    fixed: tuple[str, ...]
    fixed_task: str = ""  # when the fix changes the task (a loss the harness gives another task)
    round: int = 1  # the round that ported it: each round is split into dev and held-out on its own
    # When the fix also trains another loss on the same data: the overrides under which `mode=eval`
    # scores the fixed run's weights by the buggy program's loss, through a model class that gives
    # the fix's predictions in the form that loss reads (scripts/bench_remedy.py compares there).
    twin_scored_by: tuple[str, ...] = ()

    def overrides(self, variant: str) -> tuple[str, ...]:
        task = self.fixed_task if variant == "fixed" and self.fixed_task else self.task
        return (*COMMON, f"data._target_=external.{self.id}.build", f"data.task={task}", *getattr(self, variant))


# Round 2's expected findings, fixed from each source's fault and the port's own metrics (`--round 2
# --no-diagnosis`) before any diagnosis of its runs was read (docs/external_benchmark.md).
EXPECTED_R2: dict[str, tuple[str, ...]] = {
    "so_31556268": ("slow_progress", "plateau_at_prior"),
    "so_31627380": (),  # softmax + cross-entropy over two classes is sound; both keep the raw columns
    "so_34673164": ("unnormalised_inputs", "vanishing_gradients"),
    "so_38648195": ("output_activation", "underfitting"),
    "so_39217567": ("vanishing_gradients", "plateau_at_prior"),
    "so_44164749": (),  # a sound softmax classifier; the fix's "accuracy" is Keras' per-output binary one
    "so_45337371": ("output_activation", "vanishing_gradients", "plateau_at_prior"),
    "so_45442843": ("output_activation", "unnormalised_inputs", "vanishing_gradients", "plateau_at_prior"),
    "gh_gol_nn": ("slow_progress", "underfitting"),
}

CASES = [
    Case("so_31880720", f"{SO}/31880720/Buggy Code/31880720.py",
         "Dense(1, activation='softmax') -> Dense(1, activation='sigmoid'); loss 7.67, accuracy 0.5 before",
         "classification", "the program's own rows: 10^4 all-ones (True) and 10^4 all-zeros (False), 128 wide",
         "layers, RMSprop, batch 1; 3 epochs (60000 steps) shortened to 10000",
         ("vanishing_gradients", "plateau_at_chance", "plateau_at_prior"),
         run("so_31880720.Buggy", 1, 10000, 200, *rmsprop(), *SAME_ROWS),
         run("so_31880720.Fixed", 1, 10000, 200, *rmsprop(), *SAME_ROWS)),
    Case("so_33969059", f"{SO}/33969059/Buggy Code/33969059.py",
         "Dense(1, activation='softmax') -> activation='linear' (and coefficients scaled); loss 7.2e7 before",
         "regression", "the program's generator: 100000 rows of 3 inputs in [0, 10000), linear targets",
         "layers, uniform init, dropout, SGD lr 0.1 momentum 0.9 Nesterov, batch 32; 20 epochs (62500 steps) "
         "shortened to 6000", ("vanishing_gradients", "plateau_at_prior"),
         run("so_33969059.Buggy", 32, 6000, 10000, *sgd(0.1, 0.9, True)),
         run("so_33969059.Fixed", 32, 6000, 10000, *sgd(0.1, 0.9, True), "+data.scaled=true")),
    Case("so_34311586", f"{SO}/34311586/Buggy Code/34311586.py",
         "Dense(1, 'softmax') -> 'sigmoid'; SGD lr 0.05 -> 0.1, momentum 0.9; 20 -> 10000 epochs, batch 4; "
         "loss 0.667 before", "regression", "the program's six XOR rows",
         "layers, uniform init, MSE, SGD with Nesterov momentum 0.9 (lr 0.001 buggy, 0.1 fixed, as the files "
         "have them); 10000 epochs = 20000 steps (fixed), and the buggy run's 20 epochs (20 steps) lengthened "
         "to the same 20000 so that its failure is not only its shortness",
         ("vanishing_gradients", "plateau_at_prior"),
         run("so_34311586.Buggy", 6, 20000, 6, *sgd(0.001, 0.9, True), *SAME_ROWS),
         run("so_34311586.Fixed", 4, 20000, 6, *sgd(0.1, 0.9, True), *SAME_ROWS)),
    Case("so_39525358", f"{SO}/39525358/Buggy Code/39525358.py",
         "++ X = StandardScaler().fit_transform(X); loss 0.672, accuracy 0.615 before",
         "classification", "stand-in for 'sorted output.csv' (not in the benchmark): 39 rows, 3 raw columns "
         "in the thousands, hundreds and tens, binary label",
         "layers, uniform init, Adam, the 0.33 test split; 150 epochs: batch 1 = 3900 steps (buggy), batch 10 = "
         "450 steps (fixed)", ("unnormalised_inputs", "dead_relu", "plateau_at_chance"),
         run("so_39525358.Net", 1, 3900, 13, *adam()),
         run("so_39525358.Net", 10, 450, 13, *adam(), "+data.standardise=true")),
    Case("so_44066044", f"{SO}/44066044/Buggy Code/untitled30.py",
         "++ X = preprocessing.scale(X); Dense(1, 'relu') -> 'sigmoid'; loss 9.55, accuracy 0.381 before",
         "classification", "stand-in for NetworkPackets.csv (not in the benchmark): 1250 rows of 11 raw packet "
         "columns (ports, sizes, counts), binary label; a fifth held out (the program scores its training rows)",
         "layers, normal init, Adam, batch 5, 100 epochs = 20000 steps",
         ("unnormalised_inputs", "dead_relu", "vanishing_gradients", "plateau_at_chance"),
         run("so_44066044.Buggy", 5, 20000, 250, *adam()),
         run("so_44066044.Fixed", 5, 20000, 250, *adam(), "+data.scaled=true")),
    Case("so_47352366", f"{SO}/47352366/Buggy Code/untitled36.py",
         "Dense(10, activation='relu') -> 'softmax'; loss NaN, accuracy 0.06 before",
         "classification", "MNIST stand-in: scikit-learn's digits upsampled to 28x28, in [0, 1] (1297 train, 500 val)",
         "layers (5x5 convs with bias 0.1, 1024-unit dense, dropout 0.5), Adam, batch 50, the loop's 600 steps",
         ("diverging", "dead_relu"),
         run("so_47352366.Buggy", 50, 600, 500, *adam()),
         run("so_47352366.Fixed", 50, 600, 500, *adam())),
    Case("so_48221692", f"{SO}/48221692/Buggy Model/untitled26.py",
         "Dense(1, activation='sigmoid') -> 'linear'; loss 2312 before, 122 after",
         "regression", "stand-in for Linear_Data.csv (not in the benchmark): 100 points of a noisy line, "
         "x in [0, 100), y = 0.5x + 10 + N(0, 10^2); the 0.25 test split",
         "layers, SGD lr 0.01, full batch (75), 1000 epochs = 1000 steps",
         ("vanishing_gradients", "plateau_at_prior", "slow_progress"),
         run("so_48221692.Buggy", 75, 1000, 25, *sgd()),
         run("so_48221692.Fixed", 75, 1000, 25, *sgd())),
    Case("so_48385830", f"{SO}/48385830/Buggy Code/48385830.py",
         "++ activation='sigmoid' / 'softmax' on the two layers; loss 'mean_squared_error' -> "
         "'categorical_crossentropy'; loss NaN, accuracy 0.099 before",
         "regression", "MNIST stand-in: scikit-learn's digits upsampled to 28x28, /255; one-hot targets for "
         "the buggy run's mean squared error",
         "layers, RandomNormal(1) kernels and biases, SGD lr 3.0, batch 10, 30 epochs = 3900 steps. The buggy "
         "run is a regression on one-hot rows (its MSE), the fixed one a classification",
         ("diverging", "exploding_gradients"),
         run("so_48385830.Buggy", 10, 3900, 500, *sgd(3.0), "+data.one_hot=true"),
         run("so_48385830.Fixed", 10, 3900, 500, *sgd(3.0)), fixed_task="classification"),
    Case("so_48934338", f"{SO}/48934338/Buggy Code/48934338.py",
         "SGD lr 0.1 -> 0.001; loss 1336 before, 341 after", "regression",
         "the program's 50 points of 5x^2 + noise^3 (noise seeded); validated on the midpoints",
         "layers, init, SGD, batch 32, 1000 epochs = 2000 steps",
         ("diverging", "dead_relu", "plateau_at_prior"),
         run("so_48934338.Net", 32, 2000, 50, *sgd(0.1)),
         run("so_48934338.Net", 32, 2000, 50, *sgd(0.001))),
    Case("so_50306988", f"{SO}/50306988/Buggy Code/50306988.py",
         "Dense(nr_classes, 'softmax') + categorical_crossentropy -> Dense(1, 'sigmoid') + binary_crossentropy; "
         "5 -> 50 epochs; loss 0.696, accuracy 0.5 before",
         "classification", "the program's uniform clusters (seeded); validated on a fresh draw",
         "layers, Adam, batch 32, 5 epochs = 35 steps (buggy), 50 epochs on 400 points = 650 steps (fixed)",
         ("slow_progress", "plateau_at_chance"),
         run("so_50306988.Buggy", 32, 35, 200, *adam(), eval_every=7),
         run("so_50306988.Fixed", 32, 650, 200, *adam(), "+data.per_class=200")),
    Case("so_50481178", f"{SO}/50481178/Buggy Code/50481178.py",
         "Dense(1, 'sigmoid') + binary_crossentropy -> Dense(2, 'softmax') + sparse_categorical_crossentropy; "
         "loss 0.0201, accuracy 0.994 before, 0.0169 / 0.996 after",
         "classification", "the program's make_multilabel_classification data (seeded); its 0.2 test split validates",
         "layers, Adam, batch 10, 50 epochs = 3600 steps (on the 800 rows the test split leaves; Keras' "
         "validation_split would train on 720)", (),
         run("so_50481178.Buggy", 10, 3600, 200, *adam()),
         run("so_50481178.Fixed", 10, 3600, 200, *adam())),
    Case("so_51930566", f"{SO}/51930566/Buggy Code/untitled31.py",
         "Dense(3, 'sigmoid') -> 'softmax' (and the scaled features used); loss 0.765, accuracy 0.64 before",
         "classification", "iris, as the program loads it (scikit-learn), its 0.5 split (random_state=2)",
         "layers, normal init, Adam, batch 5, 50 epochs = 750 steps",
         ("slow_progress", "dead_relu"),
         run("so_51930566.Buggy", 5, 750, 75, *adam()),
         run("so_51930566.Fixed", 5, 750, 75, *adam(), "+data.scaled=true")),
    Case("so_52800582", f"{SO}/52800582/Buggy Code/untitled35.py",
         "++ StandardScaler on x and y; loss 11112 before, 9.3e-5 after", "regression",
         "the program's 400 points of x^4; validated on the midpoints",
         "layers, Adam, full batch (400), 1000 epochs = 1000 steps (the fix's 100000 shortened to 1000)",
         ("unnormalised_inputs", "slow_progress", "plateau_at_prior"),
         run("so_52800582.Buggy", 400, 1000, 400, *adam()),
         run("so_52800582.Fixed", 400, 1000, 400, *adam(), "+data.standardise=true")),
    Case("so_55328966", f"{SO}/55328966/Buggy Code/55328966.py",
         "++ x / 255; Dense(10, 'sigmoid') -> 'softmax'; loss 2.30, accuracy 0.099 before",
         "classification", "mnist_train.csv stand-in: scikit-learn's digits upsampled to 28x28, raw 0-255 "
         "pixels (1297 train, 500 val)",
         "layers, gradient descent lr 1e-4, batch 32, 10 epochs = 410 steps",
         ("unnormalised_inputs", "plateau_at_chance"),
         run("so_55328966.Buggy", 32, 410, 500, *sgd(1e-4)),
         run("so_55328966.Fixed", 32, 410, 500, *sgd(1e-4), "+data.divide=255")),
    Case("so_59278771", f"{SO}/59278771/Buggy Model/untitled31.py",
         "++ MinMaxScaler; ++ Dense(8, 'relu'); Dense(3, 'sigmoid') -> 'softmax'; loss 1.098, accuracy 0.348 before",
         "classification", "iris (scikit-learn, the data of the program's iris.data); the fix's first 10-fold "
         "split (random_state=7) for both",
         "layers, normal init, Adam, 200 epochs: batch 5 = 5400 steps (buggy), batch 32 = 1000 steps (fixed, "
         "KerasClassifier's default batch)", ("plateau_at_chance", "dead_relu"),
         run("so_59278771.Buggy", 5, 5400, 15, *adam()),
         run("so_59278771.Fixed", 32, 1000, 15, *adam(), "+data.min_max=true")),
    Case("so_59325381", f"{SO}/59325381/Buggy Code/59325381.py",
         "-- y_train = y_train/255; ++ x_test = x_test/255; loss 11023, accuracy 0.098 before",
         "classification", "MNIST stand-in: scikit-learn's digits upsampled to 28x28 (1297 train, 500 val)",
         "layers, Adam, batch 32 (fit's default), 2 epochs = 82 steps (buggy), 10 epochs = 410 steps (fixed)",
         ("plateau_at_prior",),
         run("so_59325381.Net", 32, 82, 500, *adam(), "data.num_classes=10", "+data.labels_over_255=true"),
         run("so_59325381.Net", 32, 410, 500, *adam(), "data.num_classes=10")),
    Case("gh_averaging", f"{GH}/Buggy Model/Averaging_Neural_Networks/keras_net.py",
         "commit 53c5940: ++ Dense(2, activation='relu') between the two linear layers",
         "regression", "the program's generator (integer pairs in [0, 100] / 100, seeded); validated on a fresh draw",
         "layers, RMSprop, MSE, batch 10, 10 epochs = 10000 steps", (),
         run("gh_averaging.Buggy", 10, 10000, 1000, *rmsprop(), *SAME_ROWS),  # 10201 pairs exist: draws repeat
         run("gh_averaging.Fixed", 10, 10000, 1000, *rmsprop(), *SAME_ROWS)),
    Case("gh_facial_keypoints", f"{GH}/Buggy Model/FacialKeypointsDetection/src/1_single_hidden_layer.py",
         "commit 6543925: Adam(lr=0.1) -> SGD(lr=0.01, momentum=0.9, nesterov=True, clipnorm=1)",
         "regression", "stand-in for Kaggle's training.csv (not in the benchmark): 2140 96x96 images of 15 "
         "spots in a face-like layout, shifted per image; targets the spots' coordinates in [-1, 1]",
         "layers (linear 50-100-30), MSE, batch 32, validation_split 0.2, 100 epochs = 5400 steps; Keras 2.2's "
         "clipnorm is a global-norm clip (clip=1.0)", ("diverging", "exploding_gradients"),
         run("gh_facial_keypoints.Net", 32, 5400, 428, *adam(0.1)),
         run("gh_facial_keypoints.Net", 32, 5400, 428, *sgd(0.01, 0.9, True), "clip=1.0")),
    Case("gh_kerasma", f"{GH}/Buggy Model/kerasma/kerasma.py",
         "commit 2a2a46f: Dense 12-8-1 -> 12-24-120-36-12-1", "classification",
         "stand-in for pima-indians-diabetes.data (its 8 raw columns at their typical sizes, 768 rows, 35% "
         "positive); a fifth held out (the program scores its training rows)",
         "layers, Adam, batch 10, 150 epochs = 9300 steps", ("underfitting", "slow_progress"),
         run("gh_kerasma.Buggy", 10, 9300, 154, *adam()),
         run("gh_kerasma.Fixed", 10, 9300, 154, *adam())),
    Case("gh_movie_reviews", f"{GH}/Buggy Model/MovieReviews_Keras/MovieReviewClassification.py",
         "commit 59119a2: ++ Dropout(0.5) after each hidden layer; 4 -> 7 epochs", "classification",
         "IMDB stand-in: 15000 synthetic multi-hot reviews over 10000 words (Zipf law, 600 words leaning one "
         "way), 10000 to validate as in the program",
         "layers, RMSprop, batch 512, 4 epochs = 120 steps (buggy), 7 epochs = 210 steps (fixed)",
         ("overfitting",),
         run("gh_movie_reviews.Buggy", 512, 120, 10000, *rmsprop(), eval_every=10),
         run("gh_movie_reviews.Fixed", 512, 210, 10000, *rmsprop(), eval_every=10)),
    # Round 2: programs skipped in round 1 for a loss the harness could not train, ported once
    # `loss.function` (l1, bce) could express them. A fresh held-out set: round 1's was read.
    Case("so_31556268", f"{SO}/31556268/Buggy Code/31556268.py",
         "loss 'mean_absolute_error' + SGD(lr 0.05, momentum 0.11, Nesterov) -> 'mse' + Adam; 1000 -> 10000 epochs; "
         "loss 0.2515, accuracy 0.5 before, 0.00096 / 1 after",
         "regression", "the program's four XOR rows (it predicts on two of them; the port scores all four)",
         "layers (sigmoid 4, sigmoid 1, glorot), batch 4; mean absolute error (loss.function=l1) with SGD lr 0.05, "
         "Nesterov momentum 0.11 (buggy), MSE with Adam (fixed); 10000 epochs = 10000 steps (fixed), and the "
         "buggy run's 1000 lengthened to the same 10000 so that its failure is not only its shortness",
         EXPECTED_R2["so_31556268"],
         run("so_31556268.Buggy", 4, 10000, 4, *sgd(0.05, 0.11, True), "loss.function=l1", *SAME_ROWS),
         run("so_31556268.Fixed", 4, 10000, 4, *adam(), *SAME_ROWS), round=2,
         twin_scored_by=("loss.function=l1", "model._target_=external.so_31556268.Buggy")),
    Case("so_31627380", f"{SO}/31627380/Buggy Code/31627380.py",
         "Activation('softmax') + categorical_crossentropy -> Activation('sigmoid') + binary_crossentropy on the two "
         "one-hot outputs; loss 1.2377, accuracy 0.5829 before, 0.8325 / 0.6334 after",
         "classification", "stand-in for train.csv and test.csv (Kaggle's Titanic; in the benchmark, but not "
         "redistributed here: no licence): 891 and 418 seeded rows with Titanic's columns, types, class shares and "
         "missing values, survival following sex, class and age (38% survive), preprocessed as the program does: "
         "10 raw columns, names, tickets and cabins label-encoded (codes up to 1308); Keras' validation_split 0.2 "
         "(the last 179 rows)",
         "layers (Dense 512 ReLU, dropout 0.5, Dense 2), Adam, batch 4, 10 epochs = 1780 steps. The buggy run "
         "classifies (softmax + cross-entropy), the fixed one trains bce on the one-hot rows (loss.function=bce)",
         EXPECTED_R2["so_31627380"],
         run("so_31627380.Buggy", 4, 1780, 179, *adam()),
         run("so_31627380.Fixed", 4, 1780, 179, *adam(), "loss.function=bce", "+data.one_hot=true"),
         fixed_task="regression", round=2),
    Case("so_34673164", f"{SO}/34673164/Buggy Model/untitled39.py",
         "++ BatchNormalization() first; Activation('softmax') -> 'sigmoid'; loss 'mean_squared_error' -> "
         "'binary_crossentropy'; loss 0.1281, accuracy 0.7778 before, 0.4272 / 0.8889 after",
         "regression", "stand-in for dataset.csv (in the benchmark, but not redistributed here: no licence): 9 "
         "seeded counties, as pandas reads the file (its first row is the header), 16 raw columns at the real "
         "file's medians, spreads and decimals (populations up to 275264), the second candidate's 5 counties "
         "shifted along the columns that separate the candidates there; two candidates one-hot",
         "layers (tanh 64, 64, uniform init, dropout 0.5; batch normalisation as Keras': momentum 0.99, eps 1e-3), "
         "SGD lr 0.1 Nesterov momentum 0.9, batch 16 (all 9 rows: full batch), 20 epochs = 20 steps; MSE on the "
         "softmax (buggy), bce on the sigmoids (fixed, loss.function=bce); the programs score their own rows",
         EXPECTED_R2["so_34673164"],
         run("so_34673164.Buggy", 9, 20, 9, *sgd(0.1, 0.9, True), *SAME_ROWS),
         run("so_34673164.Fixed", 9, 20, 9, *sgd(0.1, 0.9, True), "loss.function=bce", *SAME_ROWS), round=2,
         twin_scored_by=("loss.function=auto", "model._target_=external.so_34673164.FixedScored")),
    Case("so_38648195", f"{SO}/38648195/Buggy Code/38648195.py",
         "Activation('softmax') -> 'sigmoid'; loss 'mean_squared_error' -> 'binary_crossentropy' (3 labels, "
         "multi-label); loss 0.2178, accuracy 0.6283 before, 0.46 / 0.76 after",
         "regression", "the program's make_multilabel_classification(60000, 20 features, 3 labels) and 0.2 test "
         "split, seeded",
         "layers (ReLU 20, 20, dropout 0.5), SGD lr 0.01, batch 20, 20 epochs = 48000 steps; MSE on the softmax "
         "(buggy), bce on the sigmoids (fixed, loss.function=bce)",
         EXPECTED_R2["so_38648195"],
         run("so_38648195.Buggy", 20, 48000, 12000, *sgd()),
         run("so_38648195.Fixed", 20, 48000, 12000, *sgd(), "loss.function=bce"), round=2,
         twin_scored_by=("loss.function=auto", "model._target_=external.so_38648195.FixedScored")),
    Case("so_39217567", f"{SO}/39217567/Buggy Code/39217567.py",
         "sigmoid -> ReLU on the two hidden layers; batch 50 -> 1; loss 'mse' -> 'binary_crossentropy', and the "
         "targets' shuffle commented out (identity instead of a random mapping); loss 0.25, accuracy 0.5 before, "
         "0.0759 / 0.9702 after",
         "regression", "the program's 256 8-bit vectors; targets a seeded shuffle of them (buggy) or themselves "
         "(fixed); the programs score their own rows",
         "layers (8, 8, 8, normal init), SGD lr 0.01; 1000 epochs: batch 50 = 6000 steps (buggy), batch 1 = "
         "256000 steps (fixed); MSE (buggy), bce per bit (fixed, loss.function=bce)",
         EXPECTED_R2["so_39217567"],
         run("so_39217567.Buggy", 50, 6000, 256, *sgd(), *SAME_ROWS),
         run("so_39217567.Fixed", 1, 256000, 256, *sgd(), "loss.function=bce", "+data.shuffled=false",
             *SAME_ROWS), round=2),
    Case("so_44164749", f"{SO}/44164749/Buggy Code/44164749.py",
         "Dense(10, 'softmax') + categorical_crossentropy -> 'sigmoid' + binary_crossentropy (per class); loss "
         "0.3828, accuracy 0.8883 before, 0.2011 / 0.9221 (Keras' per-output binary accuracy) after",
         "classification", "MNIST stand-in: scikit-learn's digits upsampled to 28x28, /255 (1297 train, 500 val)",
         "layers (ReLU 5000, 600, dropout 0.1), SGD lr 0.01 Nesterov momentum 0.9, batch 2000 (here the stand-in's "
         "1297 rows: full batch); the program's 150 steps (5 epochs of MNIST's 60000 rows; 5 epochs of the stand-in "
         "would be 5 steps). The buggy run classifies, the fixed one trains bce on the one-hot rows "
         "(loss.function=bce)",
         EXPECTED_R2["so_44164749"],
         run("so_44164749.Buggy", 1297, 150, 500, *sgd(0.01, 0.9, True)),
         run("so_44164749.Fixed", 1297, 150, 500, *sgd(0.01, 0.9, True), "loss.function=bce",
             "+data.one_hot=true"), fixed_task="regression", round=2),
    Case("so_45337371", f"{SO}/45337371/Buggy Model/updatepy.py",
         "Dense(1, activation='softmax') -> 'sigmoid' (binary cross-entropy on soft targets); loss 7.8535 before, "
         "0.6931 after",
         "regression", "the program's uniform inputs and soft targets, (1000, 5, 1) each, seeded; a fresh draw of "
         "200 validates (the program validates nothing)",
         "layers (ReLU 60, 50, Dense 1 on the last axis), bce on soft targets (loss.function=bce), Adam, batch 1, "
         "5 epochs = 5000 steps",
         EXPECTED_R2["so_45337371"],
         run("so_45337371.Buggy", 1, 5000, 200, *adam(), "loss.function=bce"),
         run("so_45337371.Fixed", 1, 5000, 200, *adam(), "loss.function=bce"), round=2),
    Case("so_45442843", f"{SO}/45442843/Buggy Code/untitled39.py",
         "++ X = preprocessing.scale(X); Dense(1, 'softmax') -> 'sigmoid'; loss 'mean_absolute_error' -> "
         "'binary_crossentropy'; loss 0.5019, accuracy 0.4981 before, 0.654 / 0.8348 after",
         "regression", "stand-in for dataset.csv (in the benchmark, but not redistributed here: no licence): 999 "
         "seeded rows, as pandas reads the file (its first row is the header), one raw integer column uniform in "
         "the real file's [15041, 24987], the label 1 below 20000 as there (46% positive); the first 80% train",
         "layers (Dense 1 sigmoid, Dense 1 normal init), RMSprop, batch 200, 100 epochs = 400 steps. The buggy run "
         "regresses the labels on mean absolute error (loss.function=l1), the fixed one classifies them",
         EXPECTED_R2["so_45442843"],
         run("so_45442843.Buggy", 200, 400, 200, *rmsprop(), "loss.function=l1", *SAME_ROWS),  # one integer column
         run("so_45442843.Fixed", 200, 400, 200, *rmsprop(), "+data.scaled=true", "+data.classification=true",
             *SAME_ROWS),
         fixed_task="classification", round=2),
    Case("gh_gol_nn", f"{GH}/Buggy Model/gol_nn/gol.py",
         "commit d9b30a0: loss 'binary_crossentropy' -> 'mse'; Adam lr 1e-3 (Keras' default) -> 0.01",
         "regression", "the program's generator: 8000 training and 2000 validation 3x3 fields, cells alive with "
         "probability 0.5, their next states, wrap-padded to 5x5 (seeded)",
         "layers (3x3 conv 10 ReLU, 1x1 conv 20 ReLU, 1x1 conv 1 sigmoid), batch 64, 2 epochs = 250 steps; bce per "
         "cell with Adam lr 1e-3 (buggy, loss.function=bce), MSE with Adam lr 0.01 (fixed)",
         EXPECTED_R2["gh_gol_nn"],
         run("gh_gol_nn.Buggy", 64, 250, 2000, *adam(), "loss.function=bce", *SAME_ROWS),  # 512 fields exist
         run("gh_gol_nn.Fixed", 64, 250, 2000, *adam(0.01), *SAME_ROWS), round=2,
         twin_scored_by=("loss.function=bce", "model._target_=external.gh_gol_nn.Buggy")),
]
# Every buggy program of the benchmark (the Stack Overflow folders and the GitHub projects' entry
# points): each is a case above or skipped below.
SOURCES = (
    *(f"{SO}/{post}/Buggy Code/{post}.py" for post in (
        "31556268", "31627380", "31880720", "33969059", "34311586", "38648195", "39217567", "39525358", "44164749",
        "47724077", "48251943", "48385830", "48934338", "50306988", "50481178", "55328966", "59325381")),
    *(f"{SO}/{post}/Buggy {kind}/{name}.py" for post, kind, name in (
        ("34673164", "Model", "untitled39"), ("41372874", "Model", "untitled38"), ("44066044", "Code", "untitled30"),
        ("45337371", "Model", "updatepy"), ("45442843", "Code", "untitled39"), ("47352366", "Code", "untitled36"),
        ("48221692", "Model", "untitled26"), ("48594888", "Code", "untitled41"), ("50079585", "Code", "untitled28"),
        ("51930566", "Code", "untitled31"), ("52800582", "Code", "untitled35"), ("58609115", "Code", "untitled27"),
        ("59278771", "Model", "untitled31"))),
    *(f"{GH}/Buggy Model/{path}" for path in (
        "Averaging_Neural_Networks/keras_net.py", "DDOS-ML-Detection/ddos-detect.py",
        "FacialKeypointsDetection/src/1_single_hidden_layer.py", "MovieReviews_Keras/MovieReviewClassification.py",
        "Traffic-Sign-Classifier/train.py", "gol_nn/gol.py", "hotdog-sandwich/code/trainModel.py",
        "kaggle-melbourne_properties/price-keras.py", "keras-super-resolution/train.py",
        "keras_catsdogs/keras_catsdogs.py", "kerasma/kerasma.py")),
)
SKIPPED = {  # source (a SOURCES entry) -> why it is not ported
    "41372874": "no fixed program and no fault: the benchmark records the same result before and after",
    "47724077": "the program assigns one-hot matrices into single DataFrame columns, whose effect depends on the "
                "pandas version; the fix (Adam -> SGD) leaves the raw columns in place",
    "48251943": "Book1.csv is not in the benchmark and nothing says what its columns hold; the fixed program's "
                "reported loss (0.63) is worse than the buggy one's (0.37), so a stand-in would decide the outcome",
    "48594888": "one step of batch 500 through this CIFAR convnet takes ~10 s on one CPU thread: 5 epochs do not "
                "fit the time budget",
    "50079585": "binary cross-entropy on 3-class labels (0, 1, 2), which neither the harness's label check nor bce "
                "(targets in [0, 1]) takes",
    "58609115": "the fixed files swap sigmoid/binary cross-entropy for softmax/categorical (a loss change); "
                "export78.csv is not in the benchmark",
    "DDOS-ML-Detection": "final-dataset.arff is zipped in the Correct Model folder only, and the label loop "
                         "(`labels[val]`) indexes labels by value, so the port's labels would be a guess",
    "keras-super-resolution": "the loss (binary cross-entropy on pixel values -> MSE) is expressible now (bce), but "
                              "its SRCNN (9x9 conv of 256, 3x3 of 128, 5x5 of 3 on 128x128 RGB) costs ~2 TFLOP a "
                              "batch of 64: one step takes tens of seconds on one CPU thread, against 50 epochs "
                              "(buggy) and 3000 (fixed); and its images folder is not in the benchmark",
    "kaggle-melbourne_properties": "the data is not in the benchmark and the fix rewires a model description parser; "
                                   "the loss is a command-line argument",
    "Traffic-Sign-Classifier": "GTSRB is not in the benchmark and the fix swaps activations across a 5-conv network; "
                               "too slow for the budget on 2 cores",
    "keras_catsdogs": "the fix redesigns the convnet; the zipped images train too slowly on 2 cores",
    "hotdog-sandwich": "the fix redesigns the convnet and doubles the image size; too slow on 2 cores",
}


def skipped_source(key: str) -> str:
    """The SOURCES entry a SKIPPED key (a Stack Overflow post or a GitHub project) names."""
    return next(s for s in SOURCES if f"/{key}/" in s)


PARTS = ("dev", "held-out")


ROUNDS = tuple(sorted({c.round for c in CASES}))
# Rounds whose held-out part has been scored once: only these may be diagnosed elsewhere (the remedy
# benchmark). A new round joins once its held-out part is scored.
SCORED_ROUNDS = (1, 2)


def part(case: Case) -> str:
    """The split, fixed before any diagnosis was read: within each round (a round's cases were
    ported together), the cases sorted by id, alternately dev and held-out."""
    return PARTS[sorted(c.id for c in CASES if c.round == case.round).index(case.id) % 2]


# --- running ---------------------------------------------------------------------------------

def evidence(run_dir: Path) -> dict:
    """What the run's own metrics say: best val loss and accuracy, the first non-finite loss, the
    train loss at the start and end, and the losses it is judged against."""
    summary_file, metrics_file = run_dir / "summary.json", run_dir / "metrics.jsonl"
    if not summary_file.is_file() or not metrics_file.is_file():
        return {}
    summary = json.loads(summary_file.read_text())
    rows = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
    losses = [(r["step"], r[key]) for r in rows for key in (TRAIN_LOSS, VAL_LOSS) if key in r]
    train_losses = [r[TRAIN_LOSS] for r in rows if TRAIN_LOSS in r]
    nonfinite = [step for step, loss in losses if not math.isfinite(loss)]
    accuracies = [r[VAL_ACCURACY] for r in rows if VAL_ACCURACY in r and math.isfinite(r[VAL_ACCURACY])]
    val_losses = [r[VAL_LOSS] for r in rows if VAL_LOSS in r and math.isfinite(r[VAL_LOSS])]
    return {"task": summary.get("task"), "steps": summary.get("steps"),
            "best_val_loss": min(val_losses, default=None), "best_val_accuracy": max(accuracies, default=None),
            "first_nonfinite_step": min(nonfinite, default=None),
            "train_loss_first": next((r[TRAIN_LOSS_FIRST] for r in rows if TRAIN_LOSS_FIRST in r), None),
            "train_loss_last": train_losses[-1] if train_losses else None,
            "chance_loss": summary.get("chance_loss"), "val_prior_loss": summary.get("val_prior_loss"),
            "val_majority_share": summary.get("val_majority_share")}


def findings(run_dir: Path) -> list[dict]:
    """The diagnosis of a run dir: every finding's name and severity."""
    from harness.diagnosis import diagnose, load_run

    return [{"name": f.name, "severity": f.severity.value} for f in diagnose(load_run(run_dir))]


# --- scoring ---------------------------------------------------------------------------------

def relative_loss(run: dict) -> float | None:
    """Best val loss, over the val targets' variance for regression (a fix may rescale targets)."""
    loss = run.get("best_val_loss")
    if loss is None:
        return None
    prior = run.get("val_prior_loss")
    return loss / prior if run.get("task") == "regression" and prior else loss


def reproduced(buggy: dict, fixed: dict) -> bool:
    """Did the buggy program's pathology show in its metrics, against its twin's?"""
    if buggy.get("first_nonfinite_step") is not None and fixed.get("first_nonfinite_step") is None:
        return True
    acc_b, acc_f = buggy.get("best_val_accuracy"), fixed.get("best_val_accuracy")
    if acc_b is not None and acc_f is not None and acc_b < acc_f - ACCURACY_MARGIN:
        return True
    loss_b, loss_f = relative_loss(buggy), relative_loss(fixed)
    if loss_b is None:  # no finite val loss at all
        return loss_f is not None
    return loss_f is not None and loss_b > LOSS_RATIO * loss_f


def alarms(run: dict) -> list[str]:
    """Warning and critical findings (info ones name no pathology)."""
    return [f["name"] for f in run.get("findings", []) if f["severity"] in ("warning", "critical")]


def verdict(case: Case, buggy: dict, fixed: dict) -> str:
    """named | partial | missed for a reproduced buggy run; not reproduced; error."""
    if buggy.get("error") or fixed.get("error") or not buggy.get("steps") or not fixed.get("steps"):
        return "error"
    if not reproduced(buggy, fixed):
        return "not reproduced"
    if "findings" not in buggy:
        return "reproduced"
    names = alarms(buggy)
    return "named" if set(names) & set(case.expected) else "partial" if names else "missed"


def twin_verdict(fixed: dict) -> str:
    if fixed.get("error") or not fixed.get("steps"):
        return "error"
    if "findings" not in fixed:
        return "trained"
    return "alarmed" if alarms(fixed) else "clean"


def score(cases: list[Case], results: dict[str, dict[str, dict]]) -> list[dict]:
    rows = []
    for case in cases:
        buggy, fixed = results.get(case.id, {}).get("buggy", {}), results.get(case.id, {}).get("fixed", {})
        rows.append({**asdict(case), "part": part(case), "verdict": verdict(case, buggy, fixed),
                     "twin": twin_verdict(fixed), "buggy_run": buggy, "fixed_run": fixed,
                     "buggy_alarms": alarms(buggy), "fixed_alarms": alarms(fixed)})
    return rows


def totals(rows: list[dict]) -> dict[str, int]:
    out = {v: sum(r["verdict"] == v for r in rows) for v in
           ("named", "partial", "missed", "not reproduced", "reproduced", "error")}
    out.update({t: sum(r["twin"] == t for r in rows) for t in ("clean", "alarmed", "trained")})
    return out


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _evidence(run: dict) -> str:
    if run.get("error"):
        return f"error: {run['error']}"
    nan = f", NaN from step {run['first_nonfinite_step']}" if run.get("first_nonfinite_step") is not None else ""
    acc = f", acc {_num(run.get('best_val_accuracy'))}" if run.get("best_val_accuracy") is not None else ""
    prior = f" (val prior {_num(run.get('val_prior_loss'))})" if run.get("task") == "regression" else ""
    return (f"train {_num(run.get('train_loss_first'))} → {_num(run.get('train_loss_last'))}, best val "
            f"{_num(run.get('best_val_loss'))}{prior}{acc}{nan}")


def report(rows: list[dict]) -> str:
    t = totals(rows)
    sick = t["named"] + t["partial"] + t["missed"]
    lines = ["# External benchmark: DeepLocalize's buggy Keras programs, ported", "",
             f"cases: {len(rows)}; buggy runs reproduced and diagnosed: {sick} — named {t['named']}, partial "
             f"{t['partial']}, missed {t['missed']}; not reproduced {t['not reproduced']}; reproduced, not diagnosed "
             f"{t['reproduced']}; errors {t['error']}; twins clean {t['clean']}, alarmed {t['alarmed']}, not "
             f"diagnosed {t['trained']}", "",
             "| case | part | expected | buggy run (evidence) | fixed run (evidence) | buggy verdict | buggy findings "
             "| twin | twin findings |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['id']} | {r['part']} | {', '.join(r['expected'])} | {_evidence(r['buggy_run'])} | "
                     f"{_evidence(r['fixed_run'])} | {r['verdict']} | {', '.join(r['buggy_alarms']) or '—'} | "
                     f"{r['twin']} | {', '.join(r['fixed_alarms']) or '—'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("dev", "held-out", "all"), default="all")
    parser.add_argument("--round", type=int, choices=ROUNDS, default=None, help="one round's cases (default: all)")
    parser.add_argument("--only", default="", help="cases whose id contains this text")
    parser.add_argument("--workers", type=int, default=2, help="processes at once (one thread each)")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench_external")
    parser.add_argument("--rescore", action="store_true", help="re-read the run dirs in --out; train nothing")
    parser.add_argument("--no-diagnosis", action="store_true", help="report the evidence only, no findings")
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if args.only in c.id and args.part in ("all", part(c))
             and args.round in (None, c.round)]
    if args.list:
        for c in cases:
            print(f"{c.id:22s} round {c.round} {part(c):9s} expected {', '.join(c.expected)}\n    {c.source}")
        return 0
    started = time.monotonic()
    # The runs that see the most samples start first, so that no long run is left alone at the end.
    pairs = [((c.id, variant), c.overrides(variant)) for c in cases for variant in ("buggy", "fixed")]
    runs = dict(sorted(pairs, key=lambda pair: -samples_seen(pair[1])))
    trained: dict[tuple[str, str], dict] = {key: {"error": None} for key in runs}
    if not args.rescore:
        with ThreadPoolExecutor(args.workers) as pool:
            futures = {pool.submit(run_train, overrides, args.out / cid / variant, RUN_TIMEOUT): (cid, variant)
                       for (cid, variant), overrides in runs.items()}
            for done, future in enumerate(as_completed(futures), 1):
                trained[futures[future]] = r = future.result()
                print(f"[{done}/{len(runs)}] {' '.join(futures[future])} ({r['seconds']} s) {r['error'] or ''}",
                      flush=True)
    results: dict[str, dict[str, dict]] = {c.id: {} for c in cases}
    for (cid, variant), r in trained.items():
        run_dir = args.out / cid / variant
        results[cid][variant] = {**r, **evidence(run_dir)}
        if not args.no_diagnosis and (run_dir / "metrics.jsonl").is_file():
            results[cid][variant]["findings"] = findings(run_dir)
    print(write_results(args.out, score(cases, results), time.monotonic() - started))
    return 0


def samples_seen(overrides: tuple[str, ...]) -> int:
    """trainer.max_steps x batch_size of a run's overrides: a rough guide to how long it trains."""
    values = dict(o.split("=", 1) for o in overrides if "=" in o)
    return int(values.get("trainer.max_steps", 0)) * int(values.get("batch_size", 1))


def write_results(out: Path, rows: list[dict], seconds: float) -> str:
    """results.json and results.md into `out`; returns the markdown."""
    out.mkdir(parents=True, exist_ok=True)
    summary = {"totals": totals(rows), "cases": rows, "seconds": round(seconds, 1)}
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    text = report(rows)
    (out / "results.md").write_text(text + "\n")
    return text


if __name__ == "__main__":
    sys.exit(main())
