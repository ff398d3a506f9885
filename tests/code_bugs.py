"""Programs with one bug each in the user's own forward or objective, and their fixed twins, for the
checks that name the line (harness/models/code_checks.py). A line the check must name ends with
`# names: CHECK`; tests find the line numbers by that mark, so editing this file keeps them right."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset


def tags(n_train: int = 512):
    """Multi-label data: five 0/1 tags, each a linear function of the inputs."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n_train + 256, 8, generator=g)
    y = (x @ torch.randn(8, 5, generator=g) > 0).float()
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


class SigmoidTagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.out = nn.Linear(8, 32), nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.out(torch.relu(self.body(x))))  # names: probabilities_into_logits_loss


class Tagger(SigmoidTagger):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.body(x)))


def sequential_tagger() -> nn.Module:
    """A tagger built as an nn.Sequential that ends in a Sigmoid module (the harness calls it)."""
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 5), nn.Sigmoid())  # names: built_at


def tag_loss(output: torch.Tensor, batch: list) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(output, batch[1])  # names: probabilities_into_logits_loss


class VAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc, self.dec = nn.Linear(8, 4), nn.Linear(2, 8)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + (0.5 * logvar).exp() * torch.randn_like(mu)
        return {"recon": self.dec(z), "mu": mu, "logvar": logvar}


def _kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    return (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1)).mean()


def elbo_detached(output: dict, batch: list) -> torch.Tensor:
    recon = (output["recon"] - batch[0]).pow(2).sum(1).mean()
    kl = _kl(output["mu"].detach(), output["logvar"].detach())  # names: detached_term
    return recon + 0.5 * kl  # names: detached_term


def elbo_item(output: dict, batch: list, beta: float = 0.5) -> torch.Tensor:
    recon = (output["recon"] - batch[0]).pow(2).sum(1).mean()
    kl = _kl(output["mu"], output["logvar"]).item()  # names: detached_term
    return recon + beta * kl  # names: detached_term


def elbo_data(output: dict, batch: list) -> torch.Tensor:
    recon = (output["recon"] - batch[0]).pow(2).sum(1).mean()
    kl = _kl(output["mu"].data, output["logvar"].data)  # names: detached_term
    return recon + 0.5 * kl  # names: detached_term


def elbo_numpy(output: dict, batch: list) -> torch.Tensor:
    recon = (output["recon"] - batch[0]).pow(2).sum(1).mean()
    mu = output["mu"].detach().numpy()  # names: detached_term
    kl = torch.as_tensor((mu ** 2).sum(1).mean() / 2)
    return recon + kl  # names: detached_term


def elbo(output: dict, batch: list, beta: float = 0.5) -> torch.Tensor:
    recon = (output["recon"] - batch[0]).pow(2).sum(1).mean()
    return recon + beta * _kl(output["mu"], output["logvar"])


def pairs(n_train: int = 512):
    """Regression pairs with a target of shape (B,)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n_train + 256, 8, generator=g)
    y = x @ torch.randn(8, generator=g)
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def mse_broadcast(output: torch.Tensor, batch: list) -> torch.Tensor:
    return F.mse_loss(output, batch[1])  # names: broadcast_target


def squared_error_broadcast(output: torch.Tensor, batch: list) -> torch.Tensor:
    return ((output - batch[1]) ** 2).mean()  # names: broadcast_target


class SmoothL1:
    """A loss written as a class, the way nn.Module losses are used."""

    def __call__(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.smooth_l1_loss(prediction, target)  # names: broadcast_target


CRITERION = SmoothL1()


def class_loss_broadcast(output: torch.Tensor, batch: list) -> torch.Tensor:
    return CRITERION(output, batch[1])  # names: broadcast_target


def mse(output: torch.Tensor, batch: list) -> torch.Tensor:
    return F.mse_loss(output.squeeze(-1), batch[1])


class RoundedRegressor(Regressor):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.round(self.net(x))  # names: zero_gradient_op


def classes(n_train: int = 512):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(n_train + 256, 8, generator=g)
    y = (x @ torch.randn(8, 3, generator=g)).argmax(1)
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


class OneUnitSoftmax(nn.Module):
    """A binary classifier with one output unit whose author reached for log_softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.net(x), dim=1)  # names: softmax_over_one


class LogSoftmaxNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.net(x), dim=1)


def nll(output: torch.Tensor, batch: list) -> torch.Tensor:
    return F.nll_loss(output, batch[1])


def binary_nll(output: torch.Tensor, batch: list) -> torch.Tensor:
    return F.nll_loss(output, (batch[1] > 0).long().clamp(max=0))


class ExpHead(Regressor):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(1e4 * self.net(x))  # names: nonfinite_op


class SoftplusHead(Regressor):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(self.net(x))


def raw_prices(n_train: int = 512):
    """Inputs in raw units (around 1000, spread 1), as a price table arrives."""
    g = torch.Generator().manual_seed(3)
    x = 1000 + torch.randn(n_train + 256, 8, generator=g)
    y = (x - 1000) @ torch.randn(8, generator=g)
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


class SaturatedRegressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden, self.out = nn.Linear(8, 16), nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(x)))  # names: saturated_op


class CenteredRegressor(SaturatedRegressor):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(x - 1000)))


class SoftmaxClassifier(nn.Module):
    """Returns probabilities to the harness's built-in cross-entropy."""

    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.hidden, self.out = nn.Linear(in_features, 32), nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softmax(self.out(torch.relu(self.hidden(x))), dim=1)  # names: probabilities_into_logits_loss


class SoftmaxModuleClassifier(nn.Module):
    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, 32), nn.ReLU(),
                                 nn.Linear(32, num_classes), nn.Softmax(dim=1))  # names: output_line

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # names: output_line


class ClassNet(LogSoftmaxNet):
    """Three class logits."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def cross_entropy(output: torch.Tensor, batch: list) -> torch.Tensor:
    return F.cross_entropy(output, batch[1])


def handwritten_nll(output: torch.Tensor, batch: list) -> torch.Tensor:
    probabilities = F.softmax(output, dim=1)  # names: unguarded_log
    picked = probabilities.gather(1, batch[1][:, None]).squeeze(1)
    return -torch.log(picked + 0.0).mean()  # names: unguarded_log


def guarded_nll(output: torch.Tensor, batch: list) -> torch.Tensor:
    probabilities = F.softmax(output, dim=1).clamp(1e-7, 1 - 1e-7)
    return -torch.log(probabilities.gather(1, batch[1][:, None])).mean()


class ProbabilityTagger(SigmoidTagger):
    """Tag probabilities, for a loss written by hand."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.out(torch.relu(self.body(x))))  # names: unguarded_log


def handwritten_bce(output: torch.Tensor, batch: list) -> torch.Tensor:
    y = batch[1]
    return -(y * output.log() + (1 - y) * (1 - output).log()).mean()  # names: unguarded_log


def stable_bce(output: torch.Tensor, batch: list) -> torch.Tensor:
    return F.binary_cross_entropy(output, batch[1])


class ReluHeadNet(ClassNet):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.net(x))  # names: relu_into_logits_loss


def cross_entropy_relu(output: torch.Tensor, batch: list) -> torch.Tensor:
    return F.cross_entropy(output, batch[1])  # names: relu_into_logits_loss


class LogitsNet(nn.Module):
    """Three class logits, read by a loss that takes them for probabilities."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # names: clamped_logits


def clamped_nll(output: torch.Tensor, batch: list) -> torch.Tensor:
    """Keras' categorical cross-entropy on what it takes for probabilities."""
    clipped = torch.clamp(output, 1e-7, 1 - 1e-7)  # names: clamped_logits
    return -torch.log(clipped).gather(1, batch[1][:, None]).mean()  # names: clamped_logits


def listed_tagger() -> nn.Module:
    """Its layers made on one line and handed to nn.Sequential on the next."""
    layers = [nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 5), nn.Sigmoid()]  # names: constructed
    return nn.Sequential(*layers)


class SigmoidHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = nn.Sigmoid()  # names: constructed_inside


def headed() -> nn.Module:
    return SigmoidHead()  # names: constructed


class LinearStack(nn.Module):
    """Three classes from a task a linear map cannot fit, by a stack that forgot its activations."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(8, 32),  # names: built_apart
            nn.Dropout(0.1),
            nn.Linear(32, 3),  # names: built_apart
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # names: no_nonlinearity


class ReluStack(LinearStack):
    def __init__(self) -> None:
        super().__init__()
        self.net.insert(1, nn.ReLU())


class GatedUnit(nn.Module):
    """Two layers multiplied together, then a head: a product of two computed sides is not linear."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.head = nn.Linear(8, 16), nn.Linear(8, 16), nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.a(x) * self.b(x))


class BagOfWords(nn.Module):
    """fastText: an embedding bag and one linear layer, linear on purpose."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.out = nn.Embedding(16, 8), nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed((x.abs() * 4).long().clamp(max=15)).mean(1))


def relu_module_net() -> nn.Module:
    """Its logits through an nn.ReLU module: the output_activation override can replace it."""
    return nn.Sequential(nn.Linear(8, 3), nn.ReLU())
