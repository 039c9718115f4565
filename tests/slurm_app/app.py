"""A test-only Hydra app for tests/test_slurm.py: a sweep through the real conf/cluster/slurm.yaml.

Each job runs in its Slurm allocation as the job's driver would: it starts `workers` ranks as one srun step
built by scalestudy.harness.slurm.srun_command (through the `rank` wrapper), and returns what each rank saw.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

# What one rank reports: its Horovod identity (set by the wrapper) and its Slurm ids.
RANK_PROGRAM = (
    "import json, os; print(json.dumps({k: v for k, v in os.environ.items()"
    " if k.startswith(('HOROVOD_', 'SLURM_PROCID', 'SLURM_STEP_ID', 'SLURM_JOB_ID'))}))"
)


@hydra.main(config_path="conf", config_name="app", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    from scalestudy.harness.slurm.commands import srun_command

    out = Path(HydraConfig.get().runtime.output_dir)
    log_dir = out / "rank-logs"
    cmd = srun_command(cfg, ["-c", RANK_PROGRAM], log_dir=log_dir)
    step = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    ranks = {}
    for stdout in sorted(log_dir.glob("rank.*/stdout")):
        ranks[stdout.parent.name] = json.loads(stdout.read_text().strip().splitlines()[-1])
    result = {
        "workers": int(cfg.workers),
        "returncode": step.returncode,
        "command": cmd,
        "ranks": ranks,
        "srun_output": step.stdout + step.stderr,
    }
    (out / "result.json").write_text(json.dumps(result, indent=1))
    if cfg.fail:
        raise RuntimeError(f"job with workers={cfg.workers} asked to fail")
    return result


if __name__ == "__main__":
    main()
