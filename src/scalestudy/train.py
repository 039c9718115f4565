"""python -m scalestudy.train [OVERRIDE...]   (or -m experiment=figure-1 for a figure's sweep; add --cfg job to see
each job's config without running it: config.show_sweep_configs)

The entry point of one training job (thin, as in lightning-hydra-template): main -> run -> record, in
scalestudy.harness.driver.
- run: refuse settings that cannot work (check_config), write the job's one config file (config.yaml: the
  resolved config, plus where rank 0 writes its result), and start cfg.workers Horovod ranks of the
  framework's runner (harness.launch.run_job), which ends in a JobOutcome however the ranks end.
- record: turn the outcome into ONE MLflow run in cfg.tracking.experiment, tagged source=measured: FINISHED
  with the timing numbers of every rank (harness.timing.aggregate), or FAILED with the reason and the rank logs.
  With cluster=slurm the run is left in run.json for the submitting process (harness/slurm/sweep.py), since a
  compute node may not reach the store.
The job folder (Hydra's output dir, git-ignored) keeps config.yaml, environment.json, result.json and the logs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from .cli import one_line
from .cli import run as run_command
from .config import CONF_DIR, flags_conflict, show_sweep_configs, train_refusal, wants_sweep_configs
from .harness.driver import RunFailed, record, run


@hydra.main(config_path=str(CONF_DIR), config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    job_dir = Path(HydraConfig.get().runtime.output_dir).resolve()
    job_dir.mkdir(parents=True, exist_ok=True)
    try:
        record(cfg, job_dir, run(cfg, job_dir))
    except (ValueError, RuntimeError, LookupError) as err:  # a refused setting, a failed run, a store error
        if HydraConfig.get().mode == RunMode.MULTIRUN or os.environ.get("SCALESTUDY_DEBUG", "") not in ("", "0"):
            raise  # a sweep reports each failed job itself (Hydra, submitit)
        print(f"error: {one_line(err)}", file=sys.stderr, flush=True)
        sys.exit(1 if isinstance(err, RunFailed) else 2)


if __name__ == "__main__":
    if refused := flags_conflict(sys.argv[1:]) or train_refusal(sys.argv[1:]):  # one line, exit 2
        print(f"error: {refused}", file=sys.stderr)
        sys.exit(2)
    if wants_sweep_configs(sys.argv[1:]):  # `-m ... --cfg job`: each job's config (Hydra refuses --cfg with -m)
        sys.exit(run_command(lambda argv: show_sweep_configs("train", argv)))
    sys.exit(main())
