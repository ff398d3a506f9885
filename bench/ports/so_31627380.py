"""Stack Overflow 31627380: Titanic survival through Dense 512 (ReLU), dropout 0.5 and Dense 2
under a softmax and categorical cross-entropy, on label-encoded raw columns (names, tickets and
cabins as codes in the hundreds, fares up to 512); the fix puts a sigmoid on the two outputs and
trains binary cross-entropy on the one-hot rows."""
from __future__ import annotations

import numpy as np
from sklearn import preprocessing

from .keras_like import Dense, Dropout, KerasNet
from .standins import Splits, tensors, titanic

CATEGORIES = [0, 1, 2, 4, 5, 6, 8, 9]  # Pclass, Name, Sex, SibSp, Parch, Ticket, Cabin, Embarked


class Buggy(KerasNet):
    out, keras_loss, float_targets = "softmax", "categorical_crossentropy", False

    def __init__(self) -> None:
        super().__init__((10,), [Dense(512, "relu"), Dropout(0.5), Dense(2, self.out)], self.keras_loss,
                         self.float_targets)


class Fixed(Buggy):
    out, keras_loss, float_targets = "sigmoid", "binary_crossentropy", True


def build(one_hot: bool = False) -> Splits:
    """The program's preprocessing of train.csv and test.csv (here the seeded stand-in of
    `standins.titanic`, as `pd.read_csv(..., index_col=0)` would give them): mean-filled Age and
    Fare, the categorical columns label-encoded over train and test together; Keras'
    validation_split=0.2 validates on the last 179 rows. Targets: class ids (the softmax), or the
    one-hot rows as floats (binary cross-entropy)."""
    train, test = titanic(seed=0)
    y = np.array(train.Survived)
    train = train.drop("Survived", axis=1)
    columns = train.columns
    for frame in (train, test):
        frame["Age"] = frame["Age"].fillna(frame["Age"].mean())
        frame["Fare"] = frame["Fare"].fillna(frame["Fare"].mean())
        for i in CATEGORIES:
            frame[columns[i]] = frame[columns[i]].fillna("missing")
    train, test = np.array(train), np.array(test)
    for i in CATEGORIES:
        encoder = preprocessing.LabelEncoder().fit(list(train[:, i]) + list(test[:, i]))
        train[:, i] = encoder.transform(train[:, i])
    x = train.astype(np.float32)
    targets = np.eye(2, dtype=np.float32)[y] if one_hot else y
    cut = int(len(x) * (1 - 0.2))
    return tensors(x[:cut], targets[:cut], not one_hot), tensors(x[cut:], targets[cut:], not one_hot)
