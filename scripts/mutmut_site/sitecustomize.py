"""Imported at start-up by every Python process that scripts/mutation_report.py's mutmut run starts (this folder is
on its PYTHONPATH). mutmut learns which test calls which mutated function from the calls made in the test's own
process; a test that runs `python -m scalestudy...` calls its functions in a child, where the record is lost and
the mutants of those functions count as having no test. During mutmut's stats run (MUTANT_UNDER_TEST=stats), this
writes the child's record to the file tests/mutmut_hits.py names (SCALESTUDY_MUTMUT_HITS), which gives it to the
test that started the child."""

import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats" and os.environ.get("SCALESTUDY_MUTMUT_HITS"):
    import atexit

    def _write_hits(path: str = os.environ["SCALESTUDY_MUTMUT_HITS"]) -> None:
        from mutmut.state import state

        names = sorted(state()._stats)
        if names:  # one write in append mode: children running at once do not interleave their lines
            with open(path, "a") as out:
                out.write("".join(f"{name}\n" for name in names))

    atexit.register(_write_hits)
