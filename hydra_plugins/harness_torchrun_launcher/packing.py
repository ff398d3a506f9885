"""Which GPUs each concurrent job gets: a pure function, so it is tested with fake device counts."""
from typing import List, Optional, Tuple

Slot = Tuple[int, ...]  # GPU indices of one job slot; () on CPU


def gpus_per_job(nproc_per_node: int, gpus_per_trial: Optional[int], num_gpus: int) -> int:
    """One GPU per rank unless set; 0 on a machine without GPUs."""
    if num_gpus == 0:
        return 0
    return nproc_per_node if gpus_per_trial is None else gpus_per_trial


def plan_slots(num_gpus: int, per_job: int, max_parallel: Optional[int], wanted: int) -> List[Slot]:
    """Disjoint GPU slices, one per job that may run at once.

    `wanted` is how many jobs the caller would run at once (a sweep's n_jobs). With GPUs, the
    slot count is how many `per_job` slices fit, capped by `max_parallel` and `wanted`; a job
    never shares a GPU. Without GPUs (or per_job=0): `wanted` slots with no devices, capped by
    `max_parallel`.
    """
    if per_job < 0 or num_gpus < 0:
        raise ValueError("GPU counts cannot be negative")
    if per_job == 0:
        return [()] * max(1, min(wanted, max_parallel or wanted))
    if per_job > num_gpus:
        raise ValueError(f"a job needs {per_job} GPUs but only {num_gpus} are available")
    count = num_gpus // per_job
    if max_parallel is not None:
        count = min(count, max_parallel)
    count = max(1, min(count, wanted))
    return [tuple(range(i * per_job, (i + 1) * per_job)) for i in range(count)]


def slot_env(slot: Slot) -> dict:
    """The environment that confines a job to its slot's GPUs."""
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in slot)} if slot else {}
