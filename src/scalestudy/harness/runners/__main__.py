"""One rank of a training job: python -m scalestudy.harness.runners JOB_CONFIG.yaml

Reads the job's resolved config (written by the driver, scalestudy.harness.driver) and calls the framework's runner
it names (`framework.runner._target_`, e.g. scalestudy.harness.runners.tensorflow.train). Only that runner's module,
and so only its framework, is imported.
"""

from __future__ import annotations

import sys

from hydra.utils import get_method
from omegaconf import OmegaConf


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit(f"usage: python -m scalestudy.harness.runners JOB_CONFIG.yaml (got {argv})")
    cfg = OmegaConf.load(argv[0])
    get_method(cfg.framework.runner._target_)(cfg)


if __name__ == "__main__":
    main(sys.argv[1:])
