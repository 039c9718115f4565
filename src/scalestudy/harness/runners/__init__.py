"""One rank of a training job (python -m scalestudy.harness.runners JOB_CONFIG.yaml): common.py, tensorflow.py,
mxnet.py."""

import time

# When this rank's program started: the first thing a rank runs, before any framework is imported. The launcher's
# share of a job's start-up (time_launch_s) ends here. (psutil's process create_time is no good for it: Linux
# gives the boot time in whole seconds, so it can read up to a second early.)
PROGRAM_START_UNIX = time.time()
