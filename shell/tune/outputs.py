"""What a study leaves in its study dir: ``trials.csv``, ``best.toml``, ``history.png`` and
``importances.png``; and the command's summary.
"""

from __future__ import annotations

import csv
import io
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shell.config import dump_toml
from shell.files import atomic_write
from shell.tune.settings import Settings, trial_config
from shell.tune.space import Param
from shell.tune.study import _counted, _counts, _retry_of, masked
from shell.tune.worker import SURPLUS

# Parameter importances (Optuna's fANOVA: a random forest fitted to the completed trials' scores) from fewer
# completed trials than this are a forest fitted to a handful of points: bars that look confident and change
# from one study to the next. Below it, importances.png's title and the summary's importances_note say so.
IMPORTANCE_MIN_TRIALS = 10


def _param_columns(trials: list[Any]) -> list[str]:
    return sorted({key for t in trials for key in t.params})


def write_outputs(study: Any, settings: Settings) -> dict[str, Any]:
    """Write trials.csv, best.toml and the plots into the study dir; return the command's summary."""
    directory = Path(settings.study_dir)
    trials = study.get_trials(deepcopy=False)
    space = {p.key: p for p in settings.space}
    _write_trials_csv(directory / "trials.csv", trials, space)
    counts = _counts(study)
    # a trial that gave way to another machine's on the study's last slot (worker.SURPLUS) ran nothing: it is FAIL
    # in Optuna's terms, but no failure of a run, so the summary counts it apart
    surplus = sum(1 for t in trials if t.state.name == "FAIL" and t.user_attrs.get("error") == SURPLUS)
    result: dict[str, Any] = {
        "study": settings.study, "storage": masked(settings.storage), "study_dir": str(directory),
        "trials": settings.trials, "counted": _counted(counts), "complete": counts["COMPLETE"],
        "pruned": counts["PRUNED"], "failed": counts["FAIL"] - surplus, "surplus": surplus,
        "running": counts["RUNNING"],
        "waiting": counts["WAITING"], "trials_csv": str(directory / "trials.csv"),
    }
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    if complete:
        best = max(complete, key=lambda t: t.value)
        params = {key: space[key].decode(value) for key, value in best.params.items() if key in space}
        config = trial_config(settings, params)
        header = (f"# Best config of study {settings.study!r}: trial {best.number}, mean final deterministic eval "
                  f"{best.value:.3f} over seeds {settings.seeds}\n# (per seed: {best.user_attrs.get('evals')}) at "
                  f"{config.run.total_timesteps} steps each. Run it with: ppo-core --config <this file>\n"
                  "# Tuned keys: " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in params.items()) + "\n\n")
        atomic_write(directory / "best.toml", lambda f: f.write((header + dump_toml(config)).encode()))
        result.update(best_trial=best.number, best_value=best.value, best_params=params,
                      best_config=str(directory / "best.toml"))
    result["plots"], result["notes"] = _plots(study, directory, len(complete))
    result["importances_note"] = importances_note(len(complete)) if "importances" in result["plots"] else None
    return result


def _write_trials_csv(path: Path, trials: list[Any], space: dict[str, Param]) -> None:
    columns = _param_columns(trials)
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["number", "state", "value", "seed_evals", "last_step", "last_reported", "retry_of",
                     "duration_s", "datetime_start", "datetime_complete", "error", *columns])
    for t in trials:
        duration = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and \
            t.datetime_start else ""
        evals = t.user_attrs.get("evals") or []
        last = max(t.intermediate_values) if t.intermediate_values else None
        writer.writerow([
            t.number, t.state.name, "" if t.value is None else t.value, " ".join(f"{v:.3f}" for v in evals),
            "" if last is None else last, "" if last is None else t.intermediate_values[last],
            _retry_of(t, ""), round(duration, 1) if duration != "" else "",
            t.datetime_start.isoformat(timespec="seconds") if t.datetime_start else "",
            t.datetime_complete.isoformat(timespec="seconds") if t.datetime_complete else "",
            t.user_attrs.get("error", "") if t.state.name == "FAIL" else "",  # a queued retry inherits one
            *[json.dumps(space[c].decode(t.params[c])) if c in t.params and c in space
              else t.params.get(c, "") for c in columns],
        ])
    atomic_write(path, lambda f: f.write(buffer.getvalue().encode()))


def importances_note(complete: int) -> str | None:
    """The caveat on parameter importances computed from ``complete`` completed trials: None from
    :data:`IMPORTANCE_MIN_TRIALS` on."""
    if complete >= IMPORTANCE_MIN_TRIALS:
        return None
    return (f"importances from {complete} completed trials (fewer than {IMPORTANCE_MIN_TRIALS}) are too few to "
            "tell which keys matter: treat them as noise")


def _draw_history(study: Any) -> Any:
    """Optuna's optimization-history plot, with whole trial numbers on its x axis."""
    from matplotlib.ticker import MaxNLocator
    from optuna.visualization import matplotlib as optuna_plots

    ax = optuna_plots.plot_optimization_history(study)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return ax


def _draw_importances(study: Any, complete: int) -> Any:
    """Optuna's parameter-importances plot; its title carries :func:`importances_note` when there is one."""
    from optuna.visualization import matplotlib as optuna_plots

    ax = optuna_plots.plot_param_importances(study)
    if importances_note(complete) is not None:  # Optuna's title is on the left
        ax.set_title(f"{ax.get_title(loc='left')}\nfrom only {complete} completed trials (fewer than "
                     f"{IMPORTANCE_MIN_TRIALS}): too few to tell", loc="left", color="firebrick", fontsize="medium")
    return ax


def _plots(study: Any, directory: Path, complete: int) -> tuple[dict[str, str], list[str]]:
    """history.png (with >= 1 completed trial) and importances.png (with >= 2); notes for what was skipped."""
    plots: dict[str, str] = {}
    notes: list[str] = []
    if not complete:
        return plots, ["no completed trial yet: no plots"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    drawings: list[tuple[str, Callable[[], Any]]] = [("history", lambda: _draw_history(study))]
    if complete >= 2:
        drawings.append(("importances", lambda: _draw_importances(study, complete)))
    else:
        notes.append("parameter importances need >= 2 completed trials: importances.png not drawn")
    for name, draw in drawings:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ax = draw()
            figure = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
            figure.set_size_inches(8, 5)
            figure.tight_layout()
            path = directory / f"{name}.png"
            figure.savefig(path, dpi=110)
            plt.close(figure)
            plots[name] = str(path)
        except Exception as exc:  # a plot is a convenience: never fail the study over one
            notes.append(f"{name}.png not drawn: {type(exc).__name__}: {exc}".splitlines()[0])
    return plots, notes
