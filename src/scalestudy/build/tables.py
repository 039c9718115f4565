"""LaTeX tables (placeholder until the table renderer lands)."""


def build_table(spec, runs, *, source, out_dir, commit):
    raise LookupError(f"table {spec['name']}: not built yet")
