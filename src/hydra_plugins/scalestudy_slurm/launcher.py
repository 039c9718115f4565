"""Hydra's submitit Slurm launcher, checked before sbatch (conf/cluster/slurm.yaml names it as the launcher).

Hydra loads launchers only from the `hydra_plugins` package, so this small subclass lives here. Before it
submits anything it composes every job of the sweep and asks scalestudy.harness.slurm.preflight what Slurm
would refuse or what the jobs would not find (image, data file, partition, account): one line per problem,
exit 2, nothing submitted. When sbatch itself refuses, its message comes back as one line, exit 2.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

try:  # only in an environment with hydra-submitit-launcher (the training one): Hydra imports every plugin
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
except ImportError:  # pragma: no cover - the light environment runs no sweep on Slurm
    SlurmLauncher = None


def _sbatch_refusal(err: BaseException) -> str | None:
    """sbatch's own message when the error is sbatch refusing the submission (not a job that failed)."""
    cause = err.__cause__
    if isinstance(cause, subprocess.CalledProcessError) and "sbatch" in str(cause.cmd[0] if cause.cmd else ""):
        return " ".join(str(cause.stderr or cause.output or err).split())
    return None


if SlurmLauncher is not None:

    class CheckedSlurmLauncher(SlurmLauncher):
        def launch(self, job_overrides, initial_job_idx):
            from scalestudy.harness.slurm.preflight import sweep_problems

            loader = self.hydra_context.config_loader
            configs = [loader.load_sweep_config(self.config, list(o)) for o in job_overrides]
            problems = sweep_problems(configs)
            for problem in problems:
                print(f"error: {problem}; nothing submitted", file=sys.stderr, flush=True)
            if problems:
                sys.exit(2)
            # submitit prints sbatch's stderr itself before raising: held here, so a refusal is said once, on one
            # line; anything else it held is passed on when the sweep ends (Hydra's own log goes to its handlers).
            held = io.StringIO()
            try:
                with contextlib.redirect_stderr(held):
                    return super().launch(job_overrides, initial_job_idx)
            except Exception as err:
                refusal = _sbatch_refusal(err)
                if refusal is None:
                    raise
                print(f"error: sbatch refused the sweep, nothing submitted: {refusal}", file=sys.stderr, flush=True)
                held = io.StringIO()
                sys.exit(2)
            finally:
                sys.stderr.write(held.getvalue())
