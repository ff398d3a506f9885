"""TensorBoard (logger=tensorboard): scalars, per-tensor histograms, events as text.

TensorBoard lists tag groups alphabetically and opens only the first two, so act_mean/ and
grad_norm/ (one chart per layer) would open first and bury the run's vital signs. In
TensorBoard only, every group but TB_FIRST_GROUPS gets TB_LATER_PREFIX, which sorts after every
letter: grad/ and train/ open (grad norm, loss, lr), val/ is the next header. metrics.jsonl,
which the diagnosis reads, keeps the plain keys.
"""
from __future__ import annotations

from typing import Any

from harness.core.metric_names import VAL_LOSS
from harness.logger.base import RunInfo, Sink

TB_FIRST_GROUPS = ("grad", "train", "val")
TB_LATER_PREFIX = "~"
# The monitor's groups that hold one tag per parameter or module (grad_norm/fc1.weight, ...).
PER_TENSOR_GROUPS = ("grad_norm", "param_norm", "update_ratio", "grad_dead", "act_mean", "act_std", "act_dead",
                     "attn_entropy")


def tb_tag(key: str) -> str:
    """The TensorBoard tag of a metrics.jsonl key (see TB_FIRST_GROUPS)."""
    return key if key.split("/", 1)[0] in TB_FIRST_GROUPS else TB_LATER_PREFIX + key


def custom_scalars_layout() -> dict[str, dict[str, list]]:
    """TensorBoard's Custom Scalars tab: the run's vital signs on one page, then one chart per
    per-tensor statistic with every layer in it (the Scalars tab shows one chart per tensor).
    Entries are regexes matched from the start of a tag (group names and the prefix hold no
    regex metacharacters)."""
    overview = {"loss": ["Multiline", ["train/loss$", f"{VAL_LOSS}$"]],
                "learning rate": ["Multiline", ["train/lr$"]],
                "gradient norm": ["Multiline", ["grad/norm_preclip$", "grad/norm_postclip$"]]}
    per_tensor = {group: ["Multiline", [tb_tag(f"{group}/")]] for group in PER_TENSOR_GROUPS}
    return {"overview": overview, "per tensor": per_tensor}


class TensorBoardSink(Sink):
    def __init__(self, info: RunInfo, settings: None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step hides events a crashed run wrote after its last checkpoint
        step = info.resume_step
        self.writer = SummaryWriter(str(info.run_dir / "tb"), purge_step=step + 1 if step else None)
        self.writer.add_custom_scalars(custom_scalars_layout())

    def log(self, step: int, scalars: dict[str, float], kind: str) -> None:
        for key, value in scalars.items():
            self.writer.add_scalar(tb_tag(key), value, step)

    def histograms(self, step: int, tensors: dict[str, Any]) -> None:
        for tag, values in tensors.items():  # one per tensor: after the vital signs too
            self.writer.add_histogram(TB_LATER_PREFIX + tag, values.float().cpu(), step)

    def text(self, tag: str, message: str, step: int) -> None:
        self.writer.add_text(tag, message, step)

    def close(self) -> None:
        self.writer.close()
