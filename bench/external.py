"""Does the diagnosis name the pathologies of training programs other people wrote?

    python -m bench.external                      # every case of every round (~11 min on 2 cores)
    python -m bench.external --part dev           # the part rules may be looked at against
    python -m bench.external --part held-out --no-diagnosis   # train and check the evidence only
    python -m bench.external --rescore --part dev # re-read the run dirs, train nothing
    python -m bench.external --round 2 --no-diagnosis   # one round's cases (each round has its own split)
    python -m bench.external --list

The programs are the buggy Keras programs of the DeepLocalize benchmark (github.com/Wardat-ISU/
DeepLocalize, Benchmark/StackOverflow and Benchmark/GitHub; rounds 1 and 2) and buggy Keras and
TensorFlow programs of defects4ml (github.com/mohmehmo/defects4ml) and TensorFlow-Program-Bugs
(github.com/ForeverZyh/TensorFlow-Program-Bugs; round 3); round 4 took the DeepFD
benchmark's (github.com/ArabelaTso/DeepFD) one post whose program was found, in other repositories, as DeepFD
patched it and portable (the rest: SKIPPED_R4) and umlaut's user-study programs (github.com/BerkeleyHCI/umlaut,
user_eval/), each beside its fixed twin, ported to PyTorch in bench/ports/ (docs/external_benchmark.md). Each program trains as
`python train.py ...` in a process of its own (one thread), with the harness's own stability knobs
off (no clip unless the program clips, constant LR, no guard) so it runs as its author ran it.

A buggy run whose pathology did not show in its own metrics is "not reproduced" (REPRODUCED below)
and left out of the sick score; its twin still counts. A reproduced buggy run is named when a
warning or critical finding is in its case's expected set, partial when some other warning or
critical finding fires, missed when none does. A twin is clean with no warning or critical finding,
alarmed otherwise, unless each of its alarms is one of its case's `twin_sick` findings and the twin's
own recorded metric shows it (TWIN_SICK_METRIC) while the twin did not learn: then it is "sick". A twin
that learned (`learned()`) counts every alarm as false. Results land in --out: results.json and
results.md, each round's totals apart.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path


from harness.core.metric_names import (ACT_DEAD, TRAIN_LOSS, TRAIN_LOSS_FIRST, VAL_ACCURACY,
                                       VAL_LOSS, VAL_LOSS_ON_TRAIN)
from bench.train_process import run_train

ROOT = Path(__file__).resolve().parents[1]

# seconds per train.py process: so_39217567's fixed run (256000 batch-1 steps) takes ~5 min on a free
# core and took 600 s beside other jobs on 2 cores
RUN_TIMEOUT = 1200.0
SO, GH = "Benchmark/StackOverflow", "Benchmark/GitHub"  # in Wardat-ISU/DeepLocalize (rounds 1 and 2)
# Round 3's collections, named in each source path: repository, then the path in it.
D4ML, TFPB = "mohmehmo/defects4ml:", "ForeverZyh/TensorFlow-Program-Bugs:"
# Round 4's: DeepFD (its benchmark sheet; the two programs the repository holds) and umlaut's user study.
DFD, UMLAUT = "ArabelaTso/DeepFD:", "BerkeleyHCI/umlaut:"
DFD_SHEET = f"{DFD}Benchmark/Benchmark-with-patches.xlsx"
TFPB_SO, TFPB_GH = f"{TFPB}StackOverflow", f"{TFPB}Github"
# Reproduced, fixed before any diagnosis was read: the buggy run's loss went NaN/Inf and its twin's
# did not; or its best val accuracy is > 2 points below the twin's; or its best val loss is > 10%
# above the twin's (for regression over the variance of the val targets, since a fix may rescale them).
ACCURACY_MARGIN, LOSS_RATIO = 0.02, 1.10
# The twin rule. A twin "learned" when it reached its source's reported measure (Case.twin_goal) or
# beat its prior clearly: best val loss <= LEARNED_RATIO x the val prior (the best constant's loss;
# ln K where no prior is recorded), or, for classification, best val accuracy >= the val majority
# share + LEARNED_ACCURACY; and its eval mode works: the training samples' eval-mode loss, where
# measured (dropout, batch norm), is below the prior too. A learned twin must raise no warning and
# no critical finding.
LEARNED_RATIO, LEARNED_ACCURACY = 0.8, 0.10
# A twin that did not learn may carry a `twin_sick` finding when its own recorded metric shows it:
# finding -> (evidence key, the range the metric must be in).
TWIN_SICK_METRIC = {
    "dead_relu": ("dead_share", 0.5, 1.0),  # the largest final dead-unit share of a layer (act_dead)
    "plateau_at_prior": ("prior_ratio", 0.9, 1.1),  # best val loss / val prior: at the prior
    "plateau_at_chance": ("prior_ratio", 0.9, 1.1),
    "bn_eval_gap": ("eval_gap", 1.5, math.inf),  # eval-mode / train-mode loss of the same training samples
    "diverging": ("diverged", 1.0, 1.0),  # 1 when a train or val loss went NaN/Inf
}
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


def tf_adam(lr: float = 1e-3, eps: float = 1e-8) -> tuple[str, ...]:
    """TensorFlow 1.x's tf.train.AdamOptimizer: epsilon 1e-8. A program that sums its loss over a batch
    of B trains here on the batch mean with epsilon 1e-8 / B: Adam's steps are then the same (its
    update m / (sqrt(v) + eps) is unchanged when the gradient and eps are divided by B)."""
    return ("optim=adam", f"optim.lr={lr}", f"optim.eps={eps:g}")


def run(model: str, batch: int, steps: int, val: int, *extra: str, eval_every: int | None = None) -> tuple[str, ...]:
    """One program's overrides: its model class, batch size, optimizer steps, evals that read all
    `val` validation samples, and anything else."""
    every = eval_every or max(steps // 10, 1)
    return (f"model._target_=bench.ports.{model}", f"batch_size={batch}", f"trainer.max_steps={steps}",
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
    # the fix's predictions in the form that loss reads (bench/remedy.py compares there).
    twin_scored_by: tuple[str, ...] = ()
    # What the fixed twin's own recorded metrics show it still suffers from, set from its evidence
    # (never from its diagnosis): findings it may carry without a false alarm, each backed by its
    # measured metric (TWIN_SICK_METRIC) on the run being scored; `twin_metric` says which measure
    # justified it when it was set.
    twin_sick: tuple[str, ...] = ()
    twin_metric: str = ""
    # The source's own reported measure for the fixed program, where it states one: (evidence key,
    # "<=" or ">=", value); a twin that reaches it learned.
    twin_goal: tuple = ()

    def overrides(self, variant: str) -> tuple[str, ...]:
        task = self.fixed_task if variant == "fixed" and self.fixed_task else self.task
        return (*COMMON, f"data._target_=bench.ports.{self.id}.build", f"data.task={task}", *getattr(self, variant))


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
         run("so_33969059.Fixed", 32, 6000, 10000, *sgd(0.1, 0.9, True), "+data.scaled=true"),
         twin_sick=("plateau_at_prior",),
         twin_metric="best val 8.72e6 against the val prior 8.97e6 (0.97)"),
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
         run("so_48221692.Fixed", 75, 1000, 25, *sgd()),
         twin_sick=("plateau_at_prior",),
         twin_metric="best val 158 against the val prior 161 (0.98)"),
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
         run("so_50306988.Fixed", 32, 650, 200, *adam(), "+data.per_class=200"),
         twin_sick=("plateau_at_chance", "plateau_at_prior"),
         twin_metric="best val 0.692 against the prior 0.693, accuracy 0.5 on a balanced task"),
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
         run("gh_averaging.Fixed", 10, 10000, 1000, *rmsprop(), *SAME_ROWS),
         twin_sick=("dead_relu", "plateau_at_prior"),
         twin_metric="both units of the added Dense(2, relu) dead (1.0); best val = the val prior (1.00)"),
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
         twin_scored_by=("loss.function=l1", "model._target_=bench.ports.so_31556268.Buggy")),
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
         twin_scored_by=("loss.function=auto", "model._target_=bench.ports.so_34673164.FixedScored"),
         twin_sick=("bn_eval_gap", "plateau_at_prior"),
         twin_metric="eval-mode loss of training samples 9.8x their train-mode loss; best val 0.98 of the prior"),
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
         twin_scored_by=("loss.function=auto", "model._target_=bench.ports.so_38648195.FixedScored")),
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
         run("so_45337371.Fixed", 1, 5000, 200, *adam(), "loss.function=bce"), round=2,
         twin_sick=("dead_relu", "plateau_at_prior"),
         twin_metric="77% of a ReLU layer dead; best val 1.00 of the prior"),
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
         fixed_task="classification", round=2,
         twin_sick=("plateau_at_chance", "plateau_at_prior"),
         twin_metric="accuracy = the majority share 0.545; best val 0.96 of the prior"),
    Case("gh_gol_nn", f"{GH}/Buggy Model/gol_nn/gol.py",
         "commit d9b30a0: loss 'binary_crossentropy' -> 'mse'; Adam lr 1e-3 (Keras' default) -> 0.01",
         "regression", "the program's generator: 8000 training and 2000 validation 3x3 fields, cells alive with "
         "probability 0.5, their next states, wrap-padded to 5x5 (seeded)",
         "layers (3x3 conv 10 ReLU, 1x1 conv 20 ReLU, 1x1 conv 1 sigmoid), batch 64, 2 epochs = 250 steps; bce per "
         "cell with Adam lr 1e-3 (buggy, loss.function=bce), MSE with Adam lr 0.01 (fixed)",
         EXPECTED_R2["gh_gol_nn"],
         run("gh_gol_nn.Buggy", 64, 250, 2000, *adam(), "loss.function=bce", *SAME_ROWS),  # 512 fields exist
         run("gh_gol_nn.Fixed", 64, 250, 2000, *adam(0.01), *SAME_ROWS), round=2,
         twin_scored_by=("loss.function=bce", "model._target_=bench.ports.gh_gol_nn.Buggy")),
    # Round 3: two other collections, defects4ml (mohmehmo/defects4ml, bugs/NNN) and TensorFlow-Program-
    # Bugs (ForeverZyh/TensorFlow-Program-Bugs, Zhang et al., ISSTA 2018). Case list, split and expected
    # findings fixed from each source's fault description before any of its runs existed.
    Case("d4ml_001", f"{D4ML}bugs/001/buggy/transformer/cluttered_mnist.py",
         "tensorflow/models d816971: -tf.reduce_sum(y * tf.log(y_pred)) on the softmax -> "
         "reduce_mean(softmax_cross_entropy_with_logits); 'training loss shows nan value after a number of "
         "training iterations'; its test wants the last logged loss <= 1",
         "classification", "stand-in for mnist_sequence1_sample_5distortions5x5.npz (in the collection, not "
         "redistributed here): 10000 training and 1000 validation 40x40 canvases, each a digit of scikit-learn's "
         "set (upsampled to 28x28, in [0, 1]) at a random place and 5 random 5x5 crops of other digits",
         "layers (tanh localisation net 1600-20-6 starting at the identity, bilinear sampler as torch's "
         "affine_grid/grid_sample, two 3x3 stride-2 convs of 16, 1024 ReLU, 10; dropout 0.2; weights 0, biases "
         "N(0, 0.01) as its tf_utils), Adam (TF's, lr 1e-3), batches of 101 (its linspace indices), the "
         "collection's 10 epochs of 99 batches = 990 steps. The buggy loss sums over the batch: trained as the "
         "mean, with Adam's epsilon 1e-8/101 (the same steps); the output log(softmax) under the harness's "
         "cross-entropy is -log p of the label",
         ("diverging",),
         run("d4ml_001.Buggy", 101, 990, 1000, *tf_adam(1e-3, 1e-8 / 101)),
         run("d4ml_001.Fixed", 101, 990, 1000, *tf_adam(1e-3)), round=3,
         twin_goal=("train_loss_last", "<=", 1.0)),
    Case("d4ml_003", f"{D4ML}bugs/003/buggy/command_line/run_logistic_regression.py",
         "Deep-Learning-TensorFlow 726b371: -reduce_mean(y log p + (1 - y) log(1 - p)) on a softmax -> p and "
         "1 - p clipped at 1e-10 before the log; 'in some cases it shows nan value'",
         "regression", "MNIST stand-in: scikit-learn's digits upsampled to 28x28, in [0, 1] (1297 train, 500 "
         "val); one-hot float targets",
         "layers (784-10 softmax, zeros), Adam (TF's) lr 0.01, batch 10, 10 epochs = 1300 steps; the per-output "
         "binary cross-entropy as the harness's bce (loss.function=bce) on the logits log p - log(1 - p)",
         ("diverging",),
         run("d4ml_003.Buggy", 10, 1300, 500, *tf_adam(0.01), "loss.function=bce"),
         run("d4ml_003.Fixed", 10, 1300, 500, *tf_adam(0.01), "loss.function=bce"), round=3),
    Case("d4ml_038", f"{D4ML}bugs/038/buggy/super_basic_1.py",
         "NikhilM98/learning-deeplearning eb24906: Adam(lr=100) -> Adam(lr=0.0001) (and validation_split=0.1, "
         "the flipped rows first); 'model accuracy does not reach the level that is expected'",
         "classification", "the program's generator, seeded: 2100 ages in [13, 100] scaled to [0, 1], young 0 "
         "and old 1 but for 100 flipped rows; a fresh draw validates the buggy run, the last 10% the fixed one",
         "layers (Dense 16, 32 ReLU, 2 softmax), Adam (Keras'), batch 10, 20 epochs: 4200 steps (buggy, 2100 "
         "rows), 3780 (fixed, 1890 rows)",
         ("diverging", "plateau_at_chance"),
         run("d4ml_038.Net", 10, 4200, 2100, *adam(100.0), *SAME_ROWS),  # 88 ages exist: draws repeat
         run("d4ml_038.Net", 10, 3780, 210, *adam(1e-4), "+data.fixed=true", *SAME_ROWS), round=3),
    Case("d4ml_086", f"{D4ML}bugs/086/buggy/script.py",
         "Stack Overflow 45378493: Dense(1) + Activation('softmax') -> 'sigmoid' under binary_crossentropy; "
         "'model does not reach the expected accuracy level'; its test wants the final training loss <= 0.1",
         "classification", "the program's own rows: np.empty([6000, 10, 4]) (zeros) and np.eye(6000, 1) (one "
         "positive); validated on them (its one validation row is uninitialised)",
         "layers (Conv1D 16 and 8, batch norm, LeakyReLU 0.3, dropout 0.2, Dense 64, Dense 1), Adam (Keras'), "
         "batch 128, 100 epochs = 4700 steps; ReduceLROnPlateau (x0.9 after 30 epochs without a val-accuracy "
         "gain) left out",
         ("output_activation", "vanishing_gradients"),
         run("d4ml_086.Buggy", 128, 4700, 6000, *adam(), *SAME_ROWS),
         run("d4ml_086.Fixed", 128, 4700, 6000, *adam(), *SAME_ROWS), round=3,
         twin_goal=("train_loss_last", "<=", 0.1)),
    Case("d4ml_091", f"{D4ML}bugs/091/buggy/script.py",
         "Stack Overflow 56103207: ++ shuffle the rows before fit(validation_split=0.2) (the data is sorted by "
         "class); 'accuracy of the model stays at near 0'; its test wants val accuracy >= 0.85",
         "classification", "stand-in for x.npy (zipped in the collection): scikit-learn's digits 0-4 upsampled to "
         "28x28 in [0, 1], 177 per class, sorted by class as y.npy is; the last 20% validates (Keras' "
         "validation_split), after a seeded permutation for the fix",
         "layers (conv 5x5 32, pool, conv 3x3 16, pool, Dense 128, 64 ReLU, 5 softmax), Adam (Keras'), batch "
         "100, 20 epochs = 160 steps; 5 classes declared (data.num_classes=5: the training rows hold 4)",
         ("split_mismatch",),
         run("d4ml_091.Net", 100, 160, 177, *adam(), "data.num_classes=5"),  # Dense(5): y.npy's 5 columns
         run("d4ml_091.Net", 100, 160, 177, *adam(), "data.num_classes=5", "+data.shuffled=true"), round=3,
         twin_goal=("best_val_accuracy", ">=", 0.85)),
    Case("tfpb_gh_ips9", f"{TFPB_GH}/IPS-9/TensorFlow-Examples-buggy/examples/2 - Basic Classifiers/"
         "logistic_regression.py",
         "aymericdamien/TensorFlow-Examples: cost -tf.reduce_sum(y * tf.log(activation)) -> "
         "tf.reduce_mean(-tf.reduce_sum(y * tf.log(activation + 1e-8), 1))",
         "classification", "MNIST stand-in: scikit-learn's digits upsampled to 28x28, in [0, 1] (1297 train, 500 "
         "val)",
         "layers (784-10 softmax, zeros), Adam (TF's) lr 0.005, batch 100, 25 epochs = 325 steps. The buggy loss "
         "sums over the batch: trained as the mean with Adam's epsilon 1e-8/100 (the same steps); the output "
         "log(activation) (+ 1e-8 in the fix) under the harness's cross-entropy is the program's per-sample loss",
         ("diverging",),
         run("tfpb_gh_ips9.Buggy", 100, 325, 500, *tf_adam(0.005, 1e-10)),
         run("tfpb_gh_ips9.Fixed", 100, 325, 500, *tf_adam(0.005)), round=3),
    Case("tfpb_so_33641799", f"{TFPB_SO}/IPS-14/33641799-buggy/mnist.py",
         "gradient descent lr 0.01 -> 0.005 on -tf.reduce_sum(y_ * tf.log(y)) over batches of 205",
         "classification", "MNIST stand-in: scikit-learn's digits upsampled to 28x28, in [0, 1] (1297 train, 500 "
         "val)",
         "layers (784-10 softmax, zeros), batch 205, 1000 steps; the loss sums over the batch: trained as the "
         "mean by gradient descent at 205x the LR (2.05 buggy, 1.025 fixed), the same steps; the output log(y) "
         "under the harness's cross-entropy is the program's per-sample loss",
         ("diverging",),
         run("tfpb_so_33641799.Net", 205, 1000, 500, *sgd(2.05)),
         run("tfpb_so_33641799.Net", 205, 1000, 500, *sgd(1.025)), round=3, twin_sick=("diverging",),
         twin_metric="the fix's loss is NaN from step 25 too (--no-diagnosis evidence)"),
    Case("tfpb_so_35078027", f"{TFPB_SO}/IPS-7/35078027-buggy/MLP.py",
         "linear outputs -> tf.nn.sigmoid under the hand-written binary cross-entropy, y_ and 1 - y_ clipped at "
         "1e-10; gradient descent lr 0.05 -> 0.5",
         "regression", "MNIST stand-in: scikit-learn's digits upsampled to 28x28, in [0, 1] (1297 train, 500 "
         "val); one-hot float targets",
         "layers (784-512 sigmoid, 512-10, no biases, N(0, 1) weights), batch 100, 10000 steps; the loss sums "
         "over the 10 outputs and averages over the batch: trained as the harness's bce (the mean over outputs, "
         "loss.function=bce) on the logits log y_ - log(1 - y_), by gradient descent at 10x the LR (0.5 buggy, "
         "5.0 fixed), the same steps",
         ("diverging", "output_activation"),
         run("tfpb_so_35078027.Buggy", 100, 10000, 500, *sgd(0.5), "loss.function=bce"),
         run("tfpb_so_35078027.Fixed", 100, 10000, 500, *sgd(5.0), "loss.function=bce"), round=3),
    Case("tfpb_so_38447935", f"{TFPB_SO}/UT-15/38447935-buggy/fitting.py",
         "++ y_ = tf.expand_dims(y_, axis=1): targets [3] minus predictions [3, 1] broadcast to [3, 3]",
         "regression", "the program's three points (x = 1, 2, 3 with a column of ones; y = x), which it also "
         "evaluates on",
         "layers (w of shape (2, 1), truncated normal 0.1; float32 for its float64), Adam (TF's) lr 1e-4, full "
         "batch, 50000 steps; the loss as the program computes it, broadcast included, through the harness's "
         "own-objective feature (loss._target_), which also returns the best constant's loss as its prior part",
         ("plateau_at_prior",),
         run("tfpb_so_38447935.Net", 3, 50000, 3, *tf_adam(1e-4),
             "loss._target_=bench.ports.tfpb_so_38447935.broadcast_mse", *SAME_ROWS),
         run("tfpb_so_38447935.Net", 3, 50000, 3, *tf_adam(1e-4),
             "loss._target_=bench.ports.tfpb_so_38447935.aligned_mse", *SAME_ROWS), round=3),
    Case("tfpb_so_39939881", f"{TFPB_SO}/IPS-5/39939881-buggy/simple_regression.py",
         "GradientDescentOptimizer(0.1) -> AdamOptimizer(0.1) on a linear fit with x in [-8, 8]",
         "regression", "the program's 8 points exactly (Python's random seeded as it seeds it); the stream's "
         "next 100 points of the same line validate (it validates nothing)",
         "layers (y = x W + B, zeros), MSE, full batch, 100 steps; gradient descent lr 0.1 (buggy), Adam (TF's) "
         "lr 0.1 (fixed)",
         ("diverging", "exploding_gradients"),
         run("tfpb_so_39939881.Net", 8, 100, 100, *sgd(0.1)),
         run("tfpb_so_39939881.Net", 8, 100, 100, *tf_adam(0.1)), round=3),
    Case("tfpb_so_43239467", f"{TFPB_SO}/IPS-11/43239467-buggy/mnist.py",
         "fc_layer(..., activation=None) for the logits: the ReLU every fc_layer applied is left off the last one",
         "classification", "MNIST stand-in: scikit-learn's digits upsampled to 28x28, in [0, 1] (1297 train, 500 "
         "val)",
         "layers (5x5 convs of 32 and 64 with 2x2 pools, 1024 ReLU, 10; truncated normal 0.1, biases 0.1), "
         "softmax cross-entropy, Adam (TF's) lr 1e-3, batch 100; the program's 2000 steps shortened to 1000",
         ("output_activation", "dead_relu"),
         run("tfpb_so_43239467.Buggy", 100, 1000, 500, *tf_adam(1e-3)),
         run("tfpb_so_43239467.Fixed", 100, 1000, 500, *tf_adam(1e-3)), round=3),
    Case("tfpb_so_43636736", f"{TFPB_SO}/IPS-15/43636736-buggy/linear_regression.py",
         "GradientDescentOptimizer(0.5) -> (0.0005) on half the mean squared error, raw x = 0..99",
         "regression", "the program's 100 points exactly (numpy seeded as it seeds it), which it also evaluates on",
         "layers (Yhat = W X, W of shape (1, 2) starting at ones, X's rows x and ones), full batch, 100 steps; "
         "half the MSE trained as the MSE at half the LR (0.25 buggy, 0.00025 fixed), the same steps",
         ("diverging", "exploding_gradients"),
         run("tfpb_so_43636736.Net", 100, 100, 100, *sgd(0.25), *SAME_ROWS),
         run("tfpb_so_43636736.Net", 100, 100, 100, *sgd(0.00025), *SAME_ROWS), round=3),
    Case("tfpb_so_46577203", f"{TFPB_SO}/IPS-17/46577203-buggy/linear_regression.py",
         "GradientDescentOptimizer(0.01) -> (0.001) on the sum of squared errors of A x^2 + B x + C",
         "regression", "the program's four points (x = 0..3, y = x^2), which it also evaluates on",
         "layers (A, B, C at 0), full batch, 100 steps; the sum of squares over 4 points trained as the MSE at 4x "
         "the LR (0.04 buggy, 0.004 fixed), the same steps",
         ("diverging", "exploding_gradients"),
         run("tfpb_so_46577203.Net", 4, 100, 4, *sgd(0.04), *SAME_ROWS),
         run("tfpb_so_46577203.Net", 4, 100, 4, *sgd(0.004), *SAME_ROWS), round=3),
    # Round 4: DeepFD (ArabelaTso/DeepFD, Cao et al., ICSE 2022) holds in its repository no program that is
    # new here and portable; of the 16 Stack Overflow posts its sheet gives only as patches, one program was
    # found in other repositories as DeepFD patched it and portable (dfd_51181393; the rest: SKIPPED_R4). The
    # round also takes umlaut's user-study programs (BerkeleyHCI/umlaut, Schoop et al., CHI 2021), each beside
    # the repository's clean CIFAR program. Case list, split and expected findings fixed from the sources'
    # fault descriptions before any of their runs existed.
    Case("dfd_51181393", f"{DFD_SHEET} No. 45 (Stack Overflow 51181393)",
         "model.compile(optimizer = 'rmsprop', loss = 'mean_squared_error') (Keras' RMSprop at lr 1e-3) -> "
         "optimizers.RMSprop(lr=0.1); ground truth: learning rate. Program text: anon3173/KUnit:"
         "Benchmark_Empirical_Evaluation/51181393/51181393.py (the question's program; the patch's removed line "
         "verbatim), in DeepFD's subject form testingautomated-usi/dl-fl-repair:fl/subjects/fault_files/D7.py "
         "(the same, with train_test_split(test_size=0.2, random_state=42))",
         "regression", "the program's own data: x = linspace(1, 2, 100), y = 5x; DeepFD's split (random_state=42): "
         "80 points train, 20 validate",
         "layers (Dense(1, 'linear'): glorot weight, zero bias), MSE, RMSprop (Keras': rho 0.9, epsilon 1e-7) at "
         "lr 1e-3 (buggy) and 0.1 (fixed), batch 32, 200 epochs = 600 steps on the 80 training points",
         ("slow_progress",),
         run("dfd_51181393.Net", 32, 600, 20, *rmsprop()),
         run("dfd_51181393.Net", 32, 600, 20, *rmsprop(0.1)), round=4),
    Case("umlaut_eval_a", f"{UMLAUT}user_eval/eval_a.py",
         "the user study's program A; fixed as umlaut_example.py's comments say, into the repository's clean "
         "test_train_cifar.py (e9d9998): ++ train_images / 255; Dropout(0.8) -> Dropout(0.2) (x3); "
         "loss sparse_categorical_crossentropy on the Dense(10) logits ('doesn't take softmax') -> "
         "SparseCategoricalCrossentropy(from_logits=True)",
         "classification", "CIFAR-10 stand-in: scikit-learn's digits upsampled to 32x32 on 3 channels in random "
         "colours (seeded), 0-255 pixels (1797 images; Keras' validation_split 0.2: the last 360 validate)",
         "layers (3x3 convs of 64, 64, pool, 128, 128, pool, Dense 128, 128 ReLU, 10; glorot, zero biases; "
         "dropout after each block), Adam (Keras'), batch 128, 10 epochs = 120 steps on the stand-in's 1437 "
         "training images; the buggy loss as TF 2's sparse cross-entropy computes it on outputs that are no "
         "softmax: log(clip(z, 1e-7, 1 - 1e-7)) under the harness's cross-entropy",
         ("output_activation", "unnormalised_inputs"),
         run("umlaut_eval_a.Buggy", 128, 120, 360, *adam()),
         run("umlaut_eval_a.Fixed", 128, 120, 360, *adam(), "+data.scaled=true"), round=4),
    Case("umlaut_eval_b", f"{UMLAUT}user_eval/eval_b.py",
         "the user study's program B; fixed as umlaut_example.py's comments say, into the repository's clean "
         "test_train_cifar.py (e9d9998): activation 'linear' / none -> 'relu' on every conv and hidden dense "
         "layer; Adam(learning_rate=-1e3) ('negative learning rate') -> Adam(); validation_data=(train_images"
         "[:100], ...) -> validation_split=0.2",
         "classification", "CIFAR-10 stand-in: scikit-learn's digits upsampled to 32x32 on 3 channels in random "
         "colours (seeded), / 255 as both programs scale; the buggy run trains on all 1797 and validates on the "
         "first 100 of them, the fix's validation_split 0.2 holds the last 360 out",
         "layers (the same convnet, no activation (buggy) or ReLU (fixed), dropout 0.2), batch 128, 10 epochs: "
         "150 steps on 1797 images (buggy), 120 on 1437 (fixed); Adam (Keras' epsilon) at -1e3 as "
         "bench.ports.umlaut_eval_b.NegativeLRAdam: lr 1000 on the negated gradient, the same steps (torch and "
         "the harness refuse a negative LR); Adam lr 1e-3 (fixed)",
         ("diverging", "val_train_overlap"),
         run("umlaut_eval_b.Buggy", 128, 150, 100, *adam(1000.0),
             "optim._target_=bench.ports.umlaut_eval_b.NegativeLRAdam", "+data.validate_on_train=true"),
         run("umlaut_eval_b.Fixed", 128, 120, 360, *adam()), round=4),
]
# Round 3's programs looked at and not ported: source (in its repository) -> why.
SKIPPED_R3 = {
    f"{D4ML}bugs/002/buggy/tf_models/rbm_models/rbm.py":
        "an RBM trained by contrastive divergence (W.assign_add of CD-1 statistics, the fix divides them by the "
        "batch size): no loss and no gradient descent for train.py to run",
    f"{D4ML}bugs/004/buggy/command_line/run_dbn.py":
        "a DBN fine-tuned (the fix: a softmax before its hand-written cross-entropy) after RBM pre-training, "
        "which is no gradient descent and decides where fine-tuning starts",
    f"{D4ML}bugs/005/buggy/command_line/run_dbn.py": "the same program and fix as bug 004 (another commit)",
    f"{D4ML}bugs/006/buggy/autoencoder/VariationalAutoencoderRunner.py":
        "the VAE's noise has a fixed 128 rows (gaussian_sample_size), so any other batch crashes (symptom: "
        "crash); the fix also swaps standard for min-max scaling",
    f"{D4ML}bugs/010/buggy": "CIFAR-10 convnets (vmelan/cifar-experiment, a submodule): too slow on one CPU thread",
    f"{D4ML}bugs/011/buggy": "acflorea/keras-playground's cifar10-cnn.py: the fix stops a CIFAR-10 run after one "
                            "epoch when it looks poor (an early-stop wrapper); too slow on one CPU thread",
    f"{D4ML}bugs/017/buggy": "PixelCNN++ (sarus-tech/tf2-published-models): far too slow on one CPU thread",
    f"{D4ML}bugs/019/buggy": "a pix2pix GAN whose fault is the early-stopping patience (how long it trains); a GAN's "
                            "two losses are not one train.py run, and too slow on one CPU thread",
    f"{D4ML}bugs/021/buggy": "PixelCNN++ (sarus-tech/tf2-published-models), its loss: far too slow on one CPU thread",
    f"{D4ML}bugs/024/buggy": "FacialKeypointsDetection 6543925: the same program as round 1's gh_facial_keypoints",
    f"{D4ML}bugs/027/buggy": "kerasma 2a2a46f: the same program as round 1's gh_kerasma",
    f"{D4ML}bugs/031/buggy": "RankNet (airalcorn2/RankNet): fake data whose labels are all 1, and the fix swaps a "
                            "frozen Dense(1, sigmoid, weights [[1]]) for the same sigmoid and sets batch 10: the same "
                            "model, no prior to beat",
    f"{D4ML}bugs/034/buggy/src/generation/learn.py":
        "character LSTMs over a text the collection does not hold (processed_*.pickle); the fix shuffles the "
        "sequences and widens an 18-model sweep",
    f"{D4ML}bugs/035/buggy/imdb_fasttext.py": "AveragePooling1D + Flatten -> GlobalAveragePooling1D computes the "
                                              "same: a speed fix, no training pathology",
    f"{D4ML}bugs/037/buggy/examples/03_logistic_regression_mnist_sol.py":
        "the fixed program is a submodule (stanford-tensorflow-tutorials a6c4a6d) the collection does not hold; "
        "the buggy one is a sound logistic regression",
    f"{D4ML}bugs/040/buggy/train.py": "the fix reshapes an MNIST convnet because a step takes long: speed, no "
                                      "training pathology",
    f"{D4ML}bugs/041/buggy/train.py": "the fix removes a Dropout(0.5) from Keras' MNIST convnet example (12 epochs of "
                                      "60000 images): a regularisation choice, and too slow on one CPU thread",
    f"{D4ML}bugs/042/buggy/mnist_odenet.py": "an ODE-Net (odeint through convolutions): too slow on one CPU thread",
    f"{D4ML}bugs/046/buggy/XOR.py": "its test wants predictions of exactly 0 and 1, which only the fix's hard_sigmoid "
                                    "gives; the buggy sigmoid under binary cross-entropy is sound",
    f"{D4ML}bugs/048/buggy/simple_cnn.py": "a CIFAR-10 convnet (7x7 -> 3x3 kernels, Adam lr 1e-4): too slow on one "
                                           "CPU thread",
    f"{D4ML}bugs/049/buggy/gru_jena_climate.py":
        "the fix adds a GRU layer and dropout; its normalisation change (std over 200000 rows, not 2000) leaves "
        "the inputs near unit scale; 10000 steps of a GRU over 240 time steps are too slow on one CPU thread",
    f"{D4ML}bugs/078/buggy/script.py": "Stack Overflow 50306988: the same program as round 1's so_50306988",
    f"{D4ML}bugs/084/buggy/script.py": "Stack Overflow 34311586: the same program as round 1's so_34311586",
    f"{D4ML}bugs/092/buggy/script.py": "96 11x11 filters on 300x300 images: too slow on one CPU thread; and its "
                                       "labels (randint(0, 1)) are all 0",
    f"{D4ML}bugs/095/buggy/script.py": "the fix changes only the imports (tf.keras -> keras): the same model, loss "
                                       "and data",
    f"{D4ML}bugs/098/buggy/script.py": "Stack Overflow 59325381: the same program as round 1's so_59325381",
    f"{D4ML}bugs/099/buggy/script.py": "Stack Overflow 59278771: the same program as round 1's so_59278771",
    f"{D4ML}bugs/100/buggy/script.py": "Stack Overflow 55328966: the same program as round 1's so_55328966",
    f"{TFPB_SO}/IPS-1/33712178-buggy/mnist.py":
        "the deep-MNIST convnet's 20000 steps of batch 50 take ~25 min on one CPU thread, and its NaN (a softmax "
        "that underflows late in training) would not be tested by a run short enough",
    f"{TFPB_SO}/IPS-2/33699174-buggy/mnist.py": "the same program as IPS-1 (the fix adds 1e-9 inside the log)",
    f"{TFPB_SO}/IPS-6/39487825-buggy/mnist.py": "the same program and fix as IPS-1",
    f"{TFPB_SO}/IPS-4/48723158-buggy/mnist.py": "the output is a tuple (tf.add left out), passed positionally to "
                                                 "sparse_softmax_cross_entropy_with_logits: a crash",
    f"{TFPB_SO}/IPS-10/42064941-buggy/float16_broken.py": "two float16 Adam steps on an all-zero input: no training "
                                                           "to port (the fix is Adam's epsilon in float16)",
    f"{TFPB_SO}/IPS-12/42821125-buggy/binary_output.py": "the fix changes only the accuracy metric (a sigmoid before "
                                                         "the 0.5 threshold): training is the same",
    f"{TFPB_SO}/IPS-13/45002504-buggy/q2_linear_logistic_regression.py":
        "its loss adds BETA x l2_loss of the weights but not of the bias, which the harness's weight decay (every "
        "parameter) cannot express without an objective, losing the accuracy the case would be judged by",
    f"{TFPB_SO}/UT-9/40574552-buggy/neural.py": "labels of shape [1, 500] against logits [500, 2]: a shape error",
    f"{TFPB_SO}/UT-10/36343542-buggy/tflin.py":
        "an elementwise model (X * W) fed one row at a time with the cost divided by 2n: at the program's lr/n "
        "neither program moves within a budget (2000 epochs of 60000 one-row steps)",
    f"{TFPB_SO}/UT-13/42191656-buggy/linear.py": "the fix changes only the accuracy metric: training is the same",
    f"{TFPB_SO}/APIM-11/43601526-buggy/gradient.py": "the program computes gradients but never applies them (20 steps, "
                                                     "no train op): nothing trains",
    f"{TFPB_GH}/IPS-1/model-buggy/transformer/cluttered_mnist.py": "the same program and fix as defects4ml bug 001 "
                                                                   "(tensorflow/models d816971): ported once, d4ml_001",
    f"{TFPB_GH}/IPS-2/seq2seq-buggy/seq2seq/training/train.py": "google/seq2seq trained for 10 steps on toy "
                                                                "TFRecords; the fix is inside the library",
    f"{TFPB_GH}/IPS-3/DCGAN-tensorflow-buggy/main.py": "a DCGAN on CelebA: a GAN's two losses are not one train.py "
                                                        "run, and too slow on one CPU thread",
    f"{TFPB_GH}/IPS-4/DCGAN-tensorflow-buggy/main.py": "a DCGAN on CelebA (another fix), as IPS-3",
    f"{TFPB_GH}/IPS-5/Deep-Learning-TensorFlow-buggy/command_line/run_rbm.py": "the same RBM and fix as defects4ml "
                                                                               "bug 002",
    f"{TFPB_GH}/IPS-6/Deep-Learning-TensorFlow-buggy/command_line/run_logistic_regression.py":
        "the same program and fix as defects4ml bug 003: ported once, d4ml_003",
    f"{TFPB_GH}/IPS-7/Deep-Learning-TensorFlow-buggy/command_line/run_dbn.py": "the same DBN and fix as defects4ml "
                                                                               "bug 004",
    f"{TFPB_GH}/IPS-8/Deep-Learning-TensorFlow-buggy/command_line/run_dbn.py": "the same DBN and fix as defects4ml "
                                                                               "bug 004",
    f"{TFPB_GH}/IPS-10/facenet-buggy/src/train_softmax.py": "facenet's Inception-ResNet on face images: far too slow "
                                                            "on one CPU thread",
    f"{TFPB_GH}/Others-1/models-buggy/autoencoder/VariationalAutoencoderRunner.py":
        "the fix is in the VAE's generate(), which training never calls",
    f"{TFPB_GH}/Others-11/models-buggy/autoencoder/VariationalAutoencoderRunner.py": "the same program and fix as "
                                                                                     "defects4ml bug 006",
}
# Round 4's programs looked at and not ported: source -> why. DeepFD's sheet (Benchmark-with-patches.xlsx)
# lists 58 subjects with their patches; the repository holds the programs of two of them (Benchmark/Subjects),
# the rest only as the sheet's patch (the whole benchmark is a separate download, not in the repository).
_PATCH_ONLY = "only the patch is in the repository (the program, its model and its data are in DeepFD's separate " \
              "download) and no copy of the program was found elsewhere: the same model cannot be ported"
SKIPPED_R4 = {
    f"{DFD_SHEET} Nos. 1-30, 48-58": "DeepLocalize's Stack Overflow and GitHub programs, which rounds 1 and 2 ported "
                                    "or skipped",
    f"{DFD}Benchmark/Subjects/31556268/loss_mse__epoch_50000__lr_0.1/origin.py":
        "Stack Overflow 31556268: the same program as round 2's so_31556268 (DeepFD's fix: MSE, lr 0.1, 50000 epochs)",
    f"{DFD}Benchmark/Subjects/59282996/epoch_30/origin.py":
        "a masked bidirectional LSTM labelling time steps of 10 training sequences; the fix relabels the targets "
        "(1, 2 -> 0, 1, so the padding label 0 joins class 1) and narrows the output 3 -> 2 after a reshape that "
        "scrambles the time steps ((5, 20) -> (20, 5) without a transpose), and trains 30 epochs for 10: a change "
        "of task, no NaN, plateau, LR, activation or scaling fault",
    f"{DFD_SHEET} No. 31 (Stack Overflow 56380303)":
        "DeepFD's program is in testingautomated-usi/dl-fl-repair:fl/subjects/fault_files/D8.py (the patch's line "
        "verbatim; fix: 'sgd' -> Adam(lr=1e-4)), but its targets are each remainder mod 7 as a 20-bit binary code "
        "(0-3 bits on, an all-zero row for remainder 0) under a softmax and categorical cross-entropy (no built-in loss of "
        "the harness: it would need the own-objective feature), and the fix does not touch what keeps the program "
        "at chance: learning mod 7 from raw bits with its 20-20-20 MLP (the question's answer needed an LSTM, Adam "
        "and 50000 samples), so the pair does not turn on a training fault",
    f"{DFD_SHEET} No. 33 (Stack Overflow 58237726)":
        f"{_PATCH_ONLY}; the patch shows the model and data generator but not the fit call (epochs, steps), and "
        "its Conv3D of 64 8x8x8 filters over batches of 6 volumes is slow on one CPU thread",
    f"{DFD_SHEET} No. 34 (Stack Overflow 37624102)":
        f"{_PATCH_ONLY} (its fix: SGD lr 0.1 -> 0.01); the one copy found elsewhere, a rewrite for a logging callback, "
        "has SGD(lr=0.001) without decay and 50 epochs: not the line the patch changes",
    f"{DFD_SHEET} No. 35 (Stack Overflow 39810655)":
        f"{_PATCH_ONLY}; and the sheet says the fix (categorical -> sparse cross-entropy) barely changes a high accuracy",
    f"{DFD_SHEET} No. 36 (Stack Overflow 41327601)":
        f"{_PATCH_ONLY}; and the sheet says the fix (binary -> categorical cross-entropy) makes it worse",
    f"{DFD_SHEET} No. 37 (Stack Overflow 41600519)":
        "DeepFD's program is in testingautomated-usi/dl-fl-repair:fl/subjects/fault_files/D2.py, but it reads Kaggle's "
        "Higgs Boson challenge training.csv (not in any repository found; its -999 markers and the Weight column the "
        "program keeps as a feature would decide a stand-in's outcome), and the sheet's patch (rmsprop -> adam, "
        "bce -> mse) gives its fit change (1 epoch at batch 1 -> 100 at 64) only as a comment",
    f"{DFD_SHEET} No. 38 (Stack Overflow 41947039)": f"{_PATCH_ONLY}; the sheet gives no patch either",
    f"{DFD_SHEET} No. 39 (Stack Overflow 41977498)": f"{_PATCH_ONLY} (its fix: rmsprop -> Adam(lr=0.01), 10 -> 100 "
                                                     "epochs)",
    f"{DFD_SHEET} No. 40 (Stack Overflow 42514960)":
        f"{_PATCH_ONLY} (an autoencoder's ReLUs -> tanh; the sheet says the loss rose after it)",
    f"{DFD_SHEET} No. 41 (Stack Overflow 42800203)": f"{_PATCH_ONLY} (its fix: Dense(1, 'softmax') -> 'sigmoid')",
    f"{DFD_SHEET} No. 42 (Stack Overflow 44998910)": f"{_PATCH_ONLY} (its fix: 'sgd' -> SGD(learning_rate=0.03))",
    f"{DFD_SHEET} No. 43 (Stack Overflow 46642627)":
        "the program is in anon3173/KUnit:Benchmark_Empirical_Evaluation/46642627/46642627.py, but it trains binary "
        "cross-entropy on targets up to 100, and the fix's (Y - max) / max in (-1, 0] under bce (the MSE is only a "
        "comment in the patch), which the harness's bce (targets in [0, 1]) refuses; and the patch gives two "
        "replacements (Adam(), SGD(lr=1e-6)) for the same optimizer line",
    f"{DFD_SHEET} No. 44 (Stack Overflow 46995209)":
        "the one copy found, anon3173/KUnit:Benchmark_Empirical_Evaluation/46995209/46995209.py, has nine "
        "Dense(10, 'tanh') layers where the patch removes ten Dense(10, 'relu'): not the program DeepFD patched "
        "(its fix: scaled X, tanh -> ReLU, those layers removed)",
    f"{DFD_SHEET} No. 46 (Stack Overflow 47932589)": f"{_PATCH_ONLY} (its fix: min-max scaled x and y)",
    f"{DFD_SHEET} No. 47 (Stack Overflow 37213388)": f"{_PATCH_ONLY}; and its fix is 2 -> 10 epochs only",
    f"{UMLAUT}umlaut_example.py": "the repository's example: programs A's and B's bugs in one file, each commented "
                                  "with its fix (the fixes the two cases' twins apply); not one of the study's programs",
    f"{UMLAUT}user_eval/eval_demo.py": "the study's demo program (fashion-MNIST, Dense 12 ReLU, logits under "
                                       "from_logits=True, pixels / 255): sound, no fix",
    f"{UMLAUT}user_eval/eval_demo_umlaut.py": "the same demo program with umlaut's callback: sound, no fix",
}
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
    # Round 3: the defects4ml and TensorFlow-Program-Bugs programs whose bug could change training
    # behaviour (their crash, shape-error and API-change programs were not candidates), each a case
    # below or skipped in SKIPPED_R3.
    *(f"{D4ML}bugs/{path}" for path in (
        "001/buggy/transformer/cluttered_mnist.py", "003/buggy/command_line/run_logistic_regression.py",
        "038/buggy/super_basic_1.py", "086/buggy/script.py", "091/buggy/script.py")),
    *(f"{TFPB_SO}/{path}" for path in (
        "IPS-5/39939881-buggy/simple_regression.py", "IPS-7/35078027-buggy/MLP.py", "IPS-11/43239467-buggy/mnist.py",
        "IPS-14/33641799-buggy/mnist.py", "IPS-15/43636736-buggy/linear_regression.py",
        "IPS-17/46577203-buggy/linear_regression.py", "UT-15/38447935-buggy/fitting.py")),
    f"{TFPB_GH}/IPS-9/TensorFlow-Examples-buggy/examples/2 - Basic Classifiers/logistic_regression.py",
    *SKIPPED_R3,
    # Round 4: DeepFD's post 51181393 and umlaut's two study programs (cases), and what DeepFD and umlaut hold
    # besides (SKIPPED_R4).
    f"{DFD_SHEET} No. 45 (Stack Overflow 51181393)", f"{UMLAUT}user_eval/eval_a.py", f"{UMLAUT}user_eval/eval_b.py",
    *SKIPPED_R4,
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


SKIPPED.update(SKIPPED_R3)
SKIPPED.update(SKIPPED_R4)


def skipped_source(key: str) -> str:
    """The SOURCES entry a SKIPPED key (a Stack Overflow post or a GitHub project of DeepLocalize's, or
    round 3's whole source path) names."""
    return key if key in SOURCES else next(s for s in SOURCES if f"/{key}/" in s)


PARTS = ("dev", "held-out")


ROUNDS = tuple(sorted({c.round for c in CASES}))
# Rounds whose held-out part has been scored once: only these may be diagnosed elsewhere (the remedy
# benchmark). A new round joins once its held-out part is scored.
SCORED_ROUNDS = (1, 2, 3, 4)


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
    dead = last_values(rows, ACT_DEAD)
    eval_gap, prior = eval_mode_gap(rows), summary.get("val_prior_loss") or summary.get("chance_loss")
    on_train = [r[VAL_LOSS_ON_TRAIN] for r in rows if VAL_LOSS_ON_TRAIN in r and math.isfinite(r[VAL_LOSS_ON_TRAIN])]
    eval_train = sorted(on_train[-3:])[len(on_train[-3:]) // 2] if on_train else None
    best = min(val_losses, default=None)
    return {"task": summary.get("task"), "steps": summary.get("steps"),
            "best_val_loss": min(val_losses, default=None), "best_val_accuracy": max(accuracies, default=None),
            "first_nonfinite_step": min(nonfinite, default=None),
            "train_loss_first": next((r[TRAIN_LOSS_FIRST] for r in rows if TRAIN_LOSS_FIRST in r), None),
            "train_loss_last": train_losses[-1] if train_losses else None,
            "chance_loss": summary.get("chance_loss"), "val_prior_loss": summary.get("val_prior_loss"),
            "val_majority_share": summary.get("val_majority_share"),
            # the twin rule's measures: dead units, eval-mode gap, loss against the prior
            "dead_share": max(dead.values(), default=None), "dead_layer": max(dead, key=dead.get, default=None),
            "diverged": float(bool(nonfinite)), "eval_gap": eval_gap,
            "eval_train_ratio": eval_train / prior if eval_train is not None and prior else None,
            "prior_ratio": best / prior if best is not None and prior and not nonfinite else None}


def last_values(rows: list[dict], prefix: str) -> dict[str, float]:
    """Each metric under `prefix` at its last logged value (act_dead/<layer>: that layer's dead share)."""
    out: dict[str, float] = {}
    for r in rows:
        out.update({k[len(prefix):]: v for k, v in r.items() if k.startswith(prefix) and math.isfinite(v)})
    return out


def eval_mode_gap(rows: list[dict]) -> float | None:
    """The training samples' eval-mode loss (val/loss_on_train, measured for models with dropout or
    batch norm) over the train-mode loss logged at or before the same step, median of the last 3 evals."""
    ratios, train = [], None
    for r in rows:
        if TRAIN_LOSS in r and math.isfinite(r[TRAIN_LOSS]):
            train = r[TRAIN_LOSS]
        if VAL_LOSS_ON_TRAIN in r and train and math.isfinite(r[VAL_LOSS_ON_TRAIN]):
            ratios.append(r[VAL_LOSS_ON_TRAIN] / train)
    last = sorted(ratios[-3:])
    return last[len(last) // 2] if last else None


def findings(run_dir: Path) -> list[dict]:
    """The diagnosis of a run dir: every finding's name, severity and the FILE:LINE its text quotes,
    then each critical finding the live diagnosis announced while it trained (`--live`) that the
    end's diagnosis does not hold."""
    from harness.diagnosis import diagnose, load_run

    run = load_run(run_dir)
    found = [{"name": f.name, "severity": f.severity.value, "lines": QUOTED.findall(f.summary_line())}
             for f in diagnose(run)]
    held = {f["name"] for f in found if f["severity"] == "critical"}
    live = [{"name": e["finding"], "severity": "critical", "live_step": e["step"]}
            for e in run.summary.get("events", []) if e.get("kind") == "diagnosis" and e["finding"] not in held]
    return found + live


# --- scoring ---------------------------------------------------------------------------------

QUOTED = re.compile(r"([\w./-]+\.py):(\d+)")  # a FILE:LINE a finding quotes
# Per case: is the fix a change of the program's own forward or loss code ("code") or of its
# settings ("config"), and for code, the buggy port's lines the fix changes (annotated from the
# ports and their sources, apart from the checks that quote lines).
FIX_LINES_FILE = ROOT / "bench" / "external_fix_lines.json"


def fix_line(case: Case, buggy: dict) -> str | None:
    """For a case whose fix is a code change: `named` when a finding of the buggy run quotes one of
    the lines the fix changes, else `not named`; None for a config fix or an unannotated case."""
    named = fix_named(case.id, [line for f in buggy.get("findings", []) for line in f.get("lines", [])])
    return None if named is None else "named" if named else "not named"


def fix_named(case_id: str, lines: list) -> bool | None:
    """Whether `lines` ([file, line] pairs) hold one of the lines the case's fix changes; None for a
    config fix or an unannotated case."""
    fix = FIX_LINES.get(case_id)
    if not fix or fix.get("fix") != "code":
        return None
    quoted = {(file, int(line)) for file, line in lines}
    return any((fix["file"], line) in quoted for line in fix["lines"])

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


def _alarm_findings(run: dict) -> list[dict]:
    """Warning and critical findings (info ones name no pathology), live ones included."""
    return [f for f in run.get("findings", []) if f["severity"] in ("warning", "critical")]


def alarms(run: dict) -> list[str]:
    return list(dict.fromkeys(f["name"] for f in _alarm_findings(run)))


def _shown_alarms(run: dict) -> str:
    """The alarms as the table shows them: one announced live only says at which step."""
    shown = [f["name"] + (f" (live, step {f['live_step']})" if "live_step" in f else "") for f in _alarm_findings(run)]
    return ", ".join(shown) or "—"


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


def reached_goal(run: dict, goal: tuple) -> bool:
    """Did the run reach its source's reported measure, (evidence key, "<=" or ">=", value)?"""
    if not goal:
        return False
    key, sense, value = goal
    measured = run.get(key)
    if measured is None or not math.isfinite(measured):
        return False
    return measured <= value if sense == "<=" else measured >= value


def learned(run: dict, goal: tuple = ()) -> bool:
    """The twin rule's "learned": finite, and its source's reported measure reached, or its prior beaten
    clearly (LEARNED_RATIO, LEARNED_ACCURACY) with the training samples in eval mode below the prior."""
    if run.get("error") or not run.get("steps") or run.get("first_nonfinite_step") is not None:
        return False
    if reached_goal(run, goal):
        return True
    ratio, acc, share = run.get("prior_ratio"), run.get("best_val_accuracy"), run.get("val_majority_share")
    beats = (ratio is not None and ratio <= LEARNED_RATIO) or (
        acc is not None and share is not None and acc >= share + LEARNED_ACCURACY)
    in_eval_mode = run.get("eval_train_ratio")  # the training samples' eval-mode loss / the prior
    return beats and (in_eval_mode is None or in_eval_mode <= 1.0)


def backed(finding: str, run: dict) -> bool:
    """Does the twin's own recorded metric show this finding (TWIN_SICK_METRIC)?"""
    key, low, high = TWIN_SICK_METRIC.get(finding, (None, None, None))
    value = run.get(key) if key else None
    return value is not None and low <= value <= high


def false_alarms(case: Case, fixed: dict) -> list[str]:
    """The twin's alarms that count as false: all of them when it learned, else those that are not
    its case's `twin_sick` findings backed by its own metric."""
    if learned(fixed, case.twin_goal):
        return alarms(fixed)
    return [n for n in alarms(fixed) if n not in case.twin_sick or not backed(n, fixed)]


def twin_verdict(case: Case, fixed: dict) -> str:
    """clean (no alarm), sick (only its twin_sick findings, each backed by its metric), alarmed (a
    false alarm), trained (not diagnosed) or error."""
    if fixed.get("error") or not fixed.get("steps"):
        return "error"
    if "findings" not in fixed:
        return "trained"
    return "alarmed" if false_alarms(case, fixed) else "sick" if alarms(fixed) else "clean"


def score(cases: list[Case], results: dict[str, dict[str, dict]]) -> list[dict]:
    rows = []
    for case in cases:
        buggy, fixed = results.get(case.id, {}).get("buggy", {}), results.get(case.id, {}).get("fixed", {})
        rows.append({**asdict(case), "part": part(case), "verdict": verdict(case, buggy, fixed),
                     "twin": twin_verdict(case, fixed), "twin_learned": learned(fixed, case.twin_goal),
                     "buggy_run": buggy, "fixed_run": fixed, "buggy_alarms": alarms(buggy),
                     "fixed_alarms": alarms(fixed), "fixed_false_alarms": false_alarms(case, fixed),
                     "fix_line": fix_line(case, buggy)})
    return rows


def totals(rows: list[dict]) -> dict[str, int]:
    out = {v: sum(r["verdict"] == v for r in rows) for v in
           ("named", "partial", "missed", "not reproduced", "reproduced", "error")}
    out.update({t: sum(r["twin"] == t for r in rows) for t in ("clean", "sick", "alarmed", "trained")})
    out["twins learned"] = sum(bool(r.get("twin_learned")) for r in rows)
    out["code fixes"] = sum(r.get("fix_line") is not None for r in rows)
    out["code fix line named"] = sum(r.get("fix_line") == "named" for r in rows)
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


def _twin_measures(r: dict) -> str:
    """The twin's own measures the twin rule reads: learned, loss over prior, dead units, eval-mode gap."""
    run = r["fixed_run"]
    parts = [f"learned {'yes' if r.get('twin_learned') else 'no'}"]
    if run.get("prior_ratio") is not None:
        parts.append(f"val/prior {_num(run['prior_ratio'])}")
    if run.get("dead_share") is not None:
        parts.append(f"dead {_num(run['dead_share'])} ({run.get('dead_layer')})")
    if run.get("eval_gap") is not None:
        parts.append(f"eval/train-mode {_num(run['eval_gap'])}")
    if r.get("twin_sick"):
        parts.append(f"twin_sick {', '.join(r['twin_sick'])}")
    return "; ".join(parts)


def totals_line(t: dict[str, int], n: int) -> str:
    sick = t["named"] + t["partial"] + t["missed"]
    return (f"cases: {n}; buggy runs reproduced and diagnosed: {sick} — named {t['named']}, partial {t['partial']}, "
            f"missed {t['missed']}; not reproduced {t['not reproduced']}; reproduced, not diagnosed "
            f"{t['reproduced']}; errors {t['error']}; twins clean {t['clean']}, sick (backed by their metrics) "
            f"{t['sick']}, alarmed (a false alarm) {t['alarmed']}, not diagnosed {t['trained']}; twins that "
            f"learned {t['twins learned']}; fixes that change code {t['code fixes']}, the fix's line named "
            f"{t['code fix line named']}")


def report(rows: list[dict]) -> str:
    lines = ["# External benchmark: other people's buggy training programs, ported", ""]
    for round_ in sorted({r["round"] for r in rows}):
        in_round = [r for r in rows if r["round"] == round_]
        lines += [f"## Round {round_}", "", "totals: " + totals_line(totals(in_round), len(in_round)), "",
                  "| case | part | expected | buggy run (evidence) | fixed run (evidence) | buggy verdict | buggy "
                  "findings | twin | twin findings | twin measures | false twin alarms | the fix's line |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in in_round:
            lines.append(f"| {r['id']} | {r['part']} | {', '.join(r['expected'])} | {_evidence(r['buggy_run'])} | "
                         f"{_evidence(r['fixed_run'])} | {r['verdict']} | {_shown_alarms(r['buggy_run'])} | "
                         f"{r['twin']} | {_shown_alarms(r['fixed_run'])} | {_twin_measures(r)} | "
                         f"{', '.join(r['fixed_false_alarms']) or '—'} | {r.get('fix_line') or 'config fix'} |")
        lines.append("")
    return "\n".join(lines)


FIX_LINES: dict[str, dict] = json.loads(FIX_LINES_FILE.read_text()) if FIX_LINES_FILE.is_file() else {}


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
    parser.add_argument("--live", action="store_true", help="diagnose while training too: a critical finding "
                                                             "announced live counts as the run's alarm")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if args.only in c.id and args.part in ("all", part(c))
             and args.round in (None, c.round)]
    if args.list:
        for c in cases:
            print(f"{c.id:22s} round {c.round} {part(c):9s} expected {', '.join(c.expected)}\n    {c.source}")
        return 0
    started = time.monotonic()
    # The runs that see the most samples start first, so that no long run is left alone at the end.
    live = ("diagnose.live=true",) if args.live else ()
    pairs = [((c.id, variant), (*c.overrides(variant), *live)) for c in cases for variant in ("buggy", "fixed")]
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
    by_round = {str(n): totals([r for r in rows if r["round"] == n]) for n in sorted({r["round"] for r in rows})}
    summary = {"totals": totals(rows), "totals_by_round": by_round, "cases": rows, "seconds": round(seconds, 1)}
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    text = report(rows)
    (out / "results.md").write_text(text + "\n")
    return text


if __name__ == "__main__":
    sys.exit(main())
