"""Horovod ranks under Slurm: one job step (srun) per training job, one rank per GPU, in the image if given.

Each sweep job is one Slurm job, submitted by Hydra's submitit launcher (conf/cluster/slurm.yaml). Its one
task, the job's *driver* (python -m scalestudy.train), starts the job's ranks as one job step:

    srun --overlap --nodes=N --ntasks=W --ntasks-per-node=W/N ... \\
         [singularity exec --nv IMAGE] python -m scalestudy.harness.slurm rank --log-dir DIR -- \\
         python -m scalestudy.harness.runners CFG

- commands.py: the srun command line, where ranks go, their Horovod environments (pure functions);
- job.py: inside the allocation: time left, hosts, the Gloo rendezvous server, the `rank` wrapper;
- sweep.py: the submitting process records every job of a sweep in MLflow when the sweep ends.

Rendezvous (cluster.rendezvous): `gloo` works with any host MPI (none needed): the driver starts Horovod's
rendezvous server, every rank gets gloo_rendezvous_env() plus its own rank_env(). `mpi` lets srun start the
ranks as MPI processes (srun --mpi=pmix) and Horovod uses its MPI controller: only where the image's Open MPI
was built against the host's PMIx (docs/slurm.md).
"""
