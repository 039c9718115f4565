"""The training harness: one job's config and record, the launcher of its ranks, their timing, the runners
(one per framework), and Slurm. python -m scalestudy.train is its entry point (scalestudy/train.py).

job_config (settings refused before anything starts, the job's config file) -> launch (the ranks, watched to
the end: a JobOutcome) -> record (the outcome as one RunRecord, through timing's numbers) -> driver (run, then
record, in the store or in run.json for a Slurm submitter). Nothing here is imported by a rank but runners/ and
timing; this package imports no framework at module level.
"""
