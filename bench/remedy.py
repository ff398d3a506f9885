"""How often does `diagnose.remedy=auto` heal a sick run, at what compute, and does it ever
restart a healthy one?

    python -m bench.remedy                      # the whole benchmark (~8 min on 2 cores)
    python -m bench.remedy --only diverging --workers 2
    python -m bench.remedy --rescore outputs/bench_remedy   # the tables again, no training
    python -m bench.remedy --list

The sick runs are the pathology presets with a remedy plus, for every class whose finding carries
one, `--per-class` cases of the pathology suite's catalogue (bench/pathology_suite.py) across
GPT, MLP, RNN, ResNet and user models, redrawn with seeds, synthetic tasks and lengths of their
own (`--draw`; the suite's figures use draws 1-5). Checkpoints fall at every eval, as in a
typical config, so remedies that continue from a checkpoint can. Each sick run trains three
times, each as `python train.py ...` in a process of its own (one thread):
- as given, without remedies (what the user had);
- with `diagnose.remedy=auto`;
- cured: with its one bad setting undone by hand (the healthy loss of the same model).
A sick run counts as healed when its last attempt has no critical finding and its best val loss
is at most 10% above the cured run's. Compute is the steps trained across attempts over one
run's `trainer.max_steps`. Healthy runs train with and without remedies: a restart is a false one.

Results land in --out (default outputs/bench_remedy): results.json and results.md.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path


from bench.external import fix_named, relative_loss, reproduced
from harness.remedy.judge import ranked_loss
from harness.remedy.story import CODE_CHANGE
from bench.pathology_suite import HEALTHY, Case, catalogue, redrawn
from bench.train_process import run_train

ROOT = Path(__file__).resolve().parents[1]

HEALED_WITHIN = 1.10  # best val loss at most 10% above the cured run's
RUN_TIMEOUT = 900.0  # seconds per train.py process
DEFAULT_DRAW = 6  # the pathology suite's figures come from draws 1-5
# The classes whose finding carries a remedy, with the keys that hold each case's bad settings: the
# cured run drops them, so the harness's defaults apply (the healthy loss of the same model). Some
# cases stack a second cause under the first (fp16 underflow on a deep sigmoid stack, summed
# gradients at an LR too high even when averaged): their cure drops that too.
CULPRITS = {
    "diverging": ("optim.lr",),
    "oscillating": ("optim.lr", "optim.momentum"),
    "slow_progress": ("optim.lr",),
    "exploding_gradients": ("clip", "optim.lr"),
    "dead_relu": ("optim.lr", "clip"),
    "clip_pinned": ("clip",),
    "fp16_underflow": ("precision.loss_scaling", "model.activation", "+model.act"),
    "accum_sum": ("accum_reduction", "optim.lr"),
    "vanishing_gradients": ("model.activation", "+model.act", "model.ln_position", "model.residual", "model.norm"),
}
# preset (conf/experiment/pathology/), the override that undoes its one bad setting (tests/unit/diagnosis/test_pathologies.py's)
PRESETS = {
    "lr_too_high": ("diverging", "optim.lr=0.05"),
    "post_ln_no_warmup": ("vanishing_gradients", "model.ln_position=pre"),
    "deep_sigmoid": ("vanishing_gradients", "model.activation=relu"),
    "dead_relu": ("dead_relu", "optim.lr=1e-3"),
    "fp16_no_scaler": ("fp16_underflow", "precision.loss_scaling=true"),
    "accum_sum": ("accum_sum", "accum_reduction=mean"),
    "clip_too_low": ("clip_pinned", "clip=1.0"),
    "rnn_exploding": ("exploding_gradients", "clip=1.0"),
    "deep_no_residual": ("vanishing_gradients", "model.residual=true"),
}
FAMILIES = ("user-net", "user-lm", "user-rnn", "functional-net", "mlp", "gpt", "rnn", "resnet")
AUTO = ("diagnose.remedy=auto",)
EXTERNAL = "external"  # the cause (and name prefix) of the external benchmark's programs


@dataclass(frozen=True)
class Sick:
    name: str
    cause: str
    given: tuple[str, ...]  # the overrides as the user had them
    cured: tuple[str, ...]  # the same with the bad setting undone
    scored_by: tuple[str, ...] = ()  # `mode=eval` overrides that score the cured run by the given run's loss


def family(case_name: str) -> str:
    origin, variant = case_name.split("/", 1)
    return "external" if origin == EXTERNAL else next((f for f in FAMILIES if variant.startswith(f)), "preset")


def spread(cases: list[Case], n: int, counts: dict[str, int]) -> list[Case]:
    """`n` cases, each from the family least represented so far in `counts` (catalogue order
    breaks ties); `counts` is updated, so classes picked one after another share out families."""
    chosen: list[Case] = []
    for _ in range(min(n, len(cases))):
        pick = min((c for c in cases if c not in chosen), key=lambda c: counts[family(c.name)])
        counts[family(pick.name)] += 1
        chosen.append(pick)
    return chosen


def with_evals_as_checkpoints(overrides: tuple[str, ...]) -> tuple[str, ...]:
    """A checkpoint at every eval, so a remedy that may continue one finds one before its symptom."""
    every = next(o.split("=", 1)[1] for o in overrides if o.startswith("trainer.eval_every="))
    return (*(o for o in overrides if not o.startswith("trainer.ckpt_every=")), f"trainer.ckpt_every={every}")


def sick_runs(per_class: int, draw: int) -> list[Sick]:
    quiet = ("logger=none", "diagnose.report=false")  # the benchmark diagnoses the runs itself
    runs = [Sick(f"preset/{p}", cause, (f"experiment=pathology/{p}", *quiet),
                 (f"experiment=pathology/{p}", *quiet, cure)) for p, (cause, cure) in PRESETS.items()]
    by_class: dict[str, list[Case]] = defaultdict(list)
    for case in catalogue():
        if case.cause in CULPRITS:
            by_class[case.cause].append(case)
    counts: dict[str, int] = defaultdict(int)
    for cause, cases in by_class.items():
        for case in spread(cases, per_class, counts):
            given = with_evals_as_checkpoints(redrawn(case, draw).overrides)
            cured = tuple(o for o in given if o.split("=", 1)[0] not in CULPRITS[cause])
            runs.append(Sick(case.name, cause, given, cured))
    return runs


def external_runs() -> list[Sick]:
    """Other people's buggy programs (bench/external.py) whose source shows a pathology, each
    cured by its author's fix (its fixed twin) on the same task, so their losses compare; live
    diagnosis on, so an attempt stops where its finding holds."""
    from bench import external as bench_external

    # Scored rounds only: a round's held-out part must not be diagnosed before it is scored.
    return [Sick(f"{EXTERNAL}/{c.id}", EXTERNAL, with_evals_as_checkpoints((*c.overrides("buggy"), "diagnose.live=true")),
                 c.overrides("fixed"), c.twin_scored_by)
            for c in bench_external.CASES
            if c.round in bench_external.SCORED_ROUNDS and c.expected and not c.fixed_task]


def healthy_runs(n: int, draw: int) -> list[Sick]:
    """`n` healthy cases spread over the families, plus every one at a constant LR: only a run whose
    LR is held to its end is judged by the pace of its last quarter (`slow_progress`), so those are
    where a false restart from that reading would show."""
    healthy = [c for c in catalogue() if c.cause == HEALTHY]
    cases = spread(healthy, n, defaultdict(int))
    cases += [c for c in healthy if c not in cases and "schedule=constant" in c.overrides]
    return [Sick(c.name, HEALTHY, g := with_evals_as_checkpoints(redrawn(c, draw).overrides), g) for c in cases]


# --- running ---------------------------------------------------------------------------------

def train(overrides: tuple[str, ...], run_dir: Path, scored_by: tuple[str, ...] = ()) -> dict:
    """`python train.py OVERRIDES` in its own process, one thread; its summary, or the failure; with
    `scored_by`, also its best checkpoint's val loss under those overrides (`mode=eval`)."""
    result = run_train(overrides, run_dir, RUN_TIMEOUT)
    if scored_by and not result["error"]:
        # another class reads the same weights on purpose (the fix's output as the program's loss reads it)
        result["error"] = run_train(("mode=eval", "eval.other_model=true", *scored_by), run_dir, RUN_TIMEOUT)["error"]
    return {**result, **outcome(run_dir)}


def outcome(run_dir: Path) -> dict:
    """What a finished run dir says: best val loss, critical findings (the last attempt's with
    remedies), the story, and the steps trained across attempts."""
    from harness.diagnosis import Severity, diagnose, load_run

    summary_file = run_dir / "summary.json"
    if not summary_file.is_file():
        return {}
    summary = json.loads(summary_file.read_text())
    result = {"best_val_loss": summary.get("best_val_loss"), "status": summary.get("status"),
              "eval_loss": _eval_loss(run_dir),
              "max_steps": summary.get("max_steps"), "task": summary.get("task"),
              "val_prior_loss": summary.get("val_prior_loss"), "best_val_accuracy": summary.get("best_val_accuracy"),
              "first_nonfinite_step": _first_nonfinite(run_dir),
              "code_lines": [[w["file"], w["line"]] for c in summary.get("code_causes") or () for w in c["lines"]]}
    story = summary.get("attempts")
    if story:
        best = story[summary.get("best_attempt", len(story)) - 1]  # the run's result is its best attempt's
        result.update(verdict=summary["remedy_verdict"], critical=best.get("critical", []),
                      steps_trained=sum(a["steps"] - (a["restart_step"] or 0) for a in story),
                      remedies=[a["applied"]["overrides"] for a in story if a.get("applied")],
                      findings=[a["applied"]["finding"] for a in story if a.get("applied")],
                      outcomes=[a.get("outcome") for a in story if a.get("applied")],
                      restarts=[a["restart"] for a in story[1:]])
    else:
        findings = diagnose(load_run(run_dir))
        result.update(critical=[f.name for f in findings if f.severity is Severity.CRITICAL],
                      steps_trained=summary.get("steps"))
    return result


def _eval_loss(run_dir: Path) -> float | None:
    """The val loss `mode=eval` last wrote for this run, if it ran."""
    path = run_dir / "eval.json"
    return json.loads(path.read_text()).get("val_loss") if path.is_file() else None


def jobs(sick: list[Sick], healthy: list[Sick]) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    """(run name, variant, overrides, the loss the run is scored by if not its own) of every process
    to train."""
    out = []
    for s in sick:
        out += [(s.name, "given", s.given, ()), (s.name, "auto", (*s.given, *AUTO), ()),
                (s.name, "cured", s.cured, s.scored_by)]
    for h in healthy:
        out += [(h.name, "given", h.given, ()), (h.name, "auto", (*h.given, *AUTO), ())]
    return out


def as_scored(cured: dict, given: dict, scored_by: tuple[str, ...]) -> dict:
    """The cured run as the given run is scored: where it trained another loss, its best
    checkpoint's val loss under the given one, over the given run's prior (the same targets)."""
    if not scored_by:
        return cured
    return {**cured, "best_val_loss": cured.get("eval_loss"), "val_prior_loss": given.get("val_prior_loss"),
            "trained_loss": cured.get("best_val_loss")}


# --- scoring ---------------------------------------------------------------------------------

def healed(run: dict, cured: dict) -> bool:
    loss, reference = ranked_loss(relative_loss(run)), ranked_loss(relative_loss(cured))
    return not run.get("error") and not run.get("critical") and loss <= HEALED_WITHIN * reference < math.inf


def reached_in_code(name: str, auto: dict) -> bool:
    """An external program whose fix is an edit of its own code, stopped by remedy=auto as `needs a
    code change` with the fix's line named: reached, though no config override could heal it."""
    return auto.get("verdict") == CODE_CHANGE and bool(fix_named(name.split("/", 1)[-1], auto.get("code_lines", [])))


FLOAT32_TIE = 1e-6  # two losses this close are one value, up to float32 rounding


def worse(auto: dict, given: dict) -> bool:
    """remedy=auto ended with a worse best val loss than the run as given (beyond float32 rounding:
    the run as given finished from its own checkpoint ends at its loss to the 7th digit, not at
    the very float)."""
    new, old = ranked_loss(relative_loss(auto)), ranked_loss(relative_loss(given))
    return new > old and not math.isclose(new, old, rel_tol=FLOAT32_TIE)


def _first_nonfinite(run_dir: Path) -> int | None:
    from bench.external import evidence

    return evidence(run_dir).get("first_nonfinite_step") if (run_dir / "metrics.jsonl").is_file() else None


def score(sick: list[Sick], healthy: list[Sick], results: dict[str, dict[str, dict]]) -> dict:
    rows = []
    for s in sick:
        r = results.get(s.name, {})
        given, auto = r.get("given", {}), r.get("auto", {})
        cured = as_scored(r.get("cured", {}), given, s.scored_by)
        max_steps = auto.get("max_steps") or given.get("max_steps")
        rows.append({"name": s.name, "cause": s.cause, "family": family(s.name),
                     "given_critical": given.get("critical"), "verdict": auto.get("verdict"),
                     "findings": auto.get("findings", []), "remedies": auto.get("remedies", []),
                     "restarts": auto.get("restarts", []), "final_critical": auto.get("critical"),
                     "outcomes": auto.get("outcomes", []),
                     "loss_given": given.get("best_val_loss"), "loss_auto": auto.get("best_val_loss"),
                     "loss_cured": cured.get("best_val_loss"), "cured_critical": cured.get("critical"),
                     "scored_by": s.scored_by, "loss_cured_trained": cured.get("trained_loss"),
                     "healed": healed(auto, cured), "fine_without": healed(given, cured),
                     "reached": reached_in_code(s.name, auto),
                     "worse": worse(auto, given), "reproduced": s.cause != EXTERNAL or reproduced(given, cured),
                     "compute": (auto["steps_trained"] / max_steps) if auto.get("steps_trained") and max_steps
                     else None, "errors": {v: x["error"] for v, x in r.items() if x.get("error")}})
    healthy_rows = []
    for h in healthy:
        r = results.get(h.name, {})
        given, auto = r.get("given", {}), r.get("auto", {})
        healthy_rows.append({"name": h.name, "family": family(h.name), "verdict": auto.get("verdict"),
                             "restarted": bool(auto.get("remedies")), "loss_given": given.get("best_val_loss"),
                             "loss_auto": auto.get("best_val_loss"), "errors": {v: x["error"] for v, x in r.items()
                                                                                if x.get("error")}})
    return {"sick": rows, "healthy": healthy_rows}


def report(scored: dict) -> str:
    sick = [r for r in scored["sick"] if r.get("reproduced", True)]  # a program whose bug did not show: no score
    healthy = scored["healthy"]
    computes = [r["compute"] for r in sick if r["compute"] is not None]
    n_healed = sum(r["healed"] for r in sick)
    n_reached = sum(r.get("reached", False) and not r["healed"] for r in sick)
    fair = [r for r in sick if not r["cured_critical"]]  # the cured run is healthy: a loss worth matching
    false_restarts = sum(r["restarted"] for r in healthy)
    lines = ["# diagnose.remedy=auto on sick and healthy runs", "",
             f"sick runs healed: {n_healed}/{len(sick)} ({_pct(n_healed, len(sick))}) with remedies, "
             f"{sum(r['fine_without'] for r in sick)}/{len(sick)} without; a cause in the program's own code named at "
             f"the fix's line (`needs a code change`, no override reaches it): {n_reached}/{len(sick)}; healed or so "
             f"reached: {n_healed + n_reached}/{len(sick)} ({_pct(n_healed + n_reached, len(sick))}); of those whose "
             f"cured run is healthy "
             f"(no critical finding): {sum(r['healed'] for r in fair)}/{len(fair)} "
             f"({_pct(sum(r['healed'] for r in fair), len(fair))}); compute (steps across attempts / one "
             f"run's steps): median {_num(statistics.median(computes) if computes else None)}, mean "
             f"{_num(statistics.fmean(computes) if computes else None)}, max {_num(max(computes, default=None))}; "
             f"healthy runs restarted: {false_restarts}/{len(healthy)}; sick runs that remedy=auto left worse than "
             f"as given: {sum(r.get('worse', False) for r in sick)}/{len(sick)}", "",
             "| class | runs | healed | without remedies | compute, median | compute, max |", "|---|---|---|---|---|---|"]
    by_cause: dict[str, list[dict]] = defaultdict(list)
    for r in sick:
        by_cause[r["cause"]].append(r)
    for cause, rows in sorted(by_cause.items()):
        c = [r["compute"] for r in rows if r["compute"] is not None]
        lines.append(f"| {cause} | {len(rows)} | {sum(r['healed'] for r in rows)} | "
                     f"{sum(r['fine_without'] for r in rows)} | {_num(statistics.median(c) if c else None)} | "
                     f"{_num(max(c, default=None))} |")
    lines += ["", "| sick run | family | remedies applied | verdict | best val loss: given / auto / cured | compute "
              "| healed |", "|---|---|---|---|---|---|---|"]
    for r in sick:
        remedies = "; ".join(" ".join(o) for o in r["remedies"]) or "none"
        why = "" if r["healed"] else " — reached: the fix's line is named" if r.get("reached") else " — " + _miss(r)
        sick_cure = f" (cured run: {', '.join(r['cured_critical'])})" if r["cured_critical"] else ""
        if r.get("scored_by"):
            sick_cure += f" (cured run's weights under `{' '.join(r['scored_by'])}`; {_num(r['loss_cured_trained'])} under its own loss)"
        lines.append(f"| {r['name']} | {r['family']} | `{remedies}` | {r['verdict']} | {_num(r['loss_given'])} / "
                     f"{_num(r['loss_auto'])} / {_num(r['loss_cured'])}{sick_cure} | {_num(r['compute'])} | "
                     f"{'yes' if r['healed'] else 'no'}{why} |")
    lines += ["", "| healthy run | family | verdict | best val loss: without / with remedy=auto |", "|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['family']} | {r['verdict']} | {_num(r['loss_given'])} / {_num(r['loss_auto'])}"
              f"{' — ' + str(r['errors']) if r['errors'] else ''} |" for r in healthy]
    return "\n".join(lines)


def _miss(r: dict) -> str:
    if r["errors"]:
        return f"error: {r['errors']}"
    if r["final_critical"]:
        return f"still {', '.join(r['final_critical'])}"
    if r["cured_critical"]:
        return f"the cured run is itself {', '.join(r['cured_critical'])}"
    return "loss more than 10% above the cured run's"


def _num(value: float | None) -> str:
    """A number for the tables; a missing one is a dash (a sick run without a val loss diverged
    before its first eval)."""
    return "—" if value is None else f"{value:.3g}"


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}%" if b else "n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-class", type=int, default=3, help="catalogue cases per class with a remedy")
    parser.add_argument("--healthy", type=int, default=12, help="healthy runs")
    parser.add_argument("--draw", type=int, default=DEFAULT_DRAW, help="which redrawing of the catalogue's cases")
    parser.add_argument("--only", default="", help="runs whose name contains this text")
    parser.add_argument("--workers", type=int, default=2, help="processes at once (one thread each)")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench_remedy")
    parser.add_argument("--rescore", action="store_true", help="score the runs already in --out; train nothing")
    parser.add_argument("--list", action="store_true", help="print the runs and exit")
    parser.add_argument("--external", action="store_true", help="the external benchmark's buggy programs (its scored rounds), "
                        "cured by their authors' fixes, instead of the pathology presets and catalogue")
    args = parser.parse_args(argv)
    sick = [s for s in (external_runs() if args.external else sick_runs(args.per_class, args.draw))
            if args.only in s.name]
    healthy = [] if args.external else [h for h in healthy_runs(args.healthy, args.draw) if args.only in h.name]
    if args.list:
        for s in [*sick, *healthy]:
            print(f"{s.cause:20s} {s.name}: {' '.join(s.given)}")
        return 0
    results: dict[str, dict[str, dict]] = defaultdict(dict)
    todo = jobs(sick, healthy)
    if args.rescore:
        for name, variant, _, _ in todo:
            results[name][variant] = {"error": None, **outcome(args.out / name / variant)}
    else:
        with ThreadPoolExecutor(args.workers) as pool:
            futures = {pool.submit(train, overrides, args.out / name / variant, scored_by): (name, variant)
                       for name, variant, overrides, scored_by in todo}
            for done, future in enumerate(as_completed(futures), 1):
                name, variant = futures[future]
                results[name][variant] = r = future.result()
                print(f"[{done}/{len(todo)}] {name} {variant} ({r['seconds']} s): {r['error'] or ''}"
                      f"{r.get('verdict', '')} loss {_num(r.get('best_val_loss'))}", flush=True)
    scored = score(sick, healthy, results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(scored, indent=1))
    text = report(scored)
    (args.out / "results.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
