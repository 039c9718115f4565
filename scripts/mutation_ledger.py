"""The ledger of mutmut's results: benchmarks/mutation-results.json (committed), so that a run in a new checkout goes
on from the runs before it (scripts/mutation_report.py; docs/testing.md, "Results that outlive a checkout").

Per module and function: mutmut's hash of the function's source and each mutant's exit code (null: not checked yet),
one line per function; and a line per run. mutmut keeps a result while its function's hash is the same, so restore()
writes the ledger as mutmut's meta files in a new mutants/ and record() merges what a run checked back in.
"""

from __future__ import annotations

import json
from pathlib import Path

# mutmut's exit codes of a mutant's test run, as its `results` names them (mutmut/stats.py).
STATUS = {1: "killed", 3: "killed", 37: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
          None: "not checked"}  # fmt: skip
# A mutant whose tests ran past their limit counts as caught, as mutmut counts it: an infinite loop is a bug found.
CAUGHT = ("killed", "timeout")


def empty() -> dict:
    return {"mutmut": mutmut_version(), "runs": [], "modules": {}}


def module_of(meta: Path, repo: Path) -> str:
    """mutants/src/scalestudy/ingest/fetch.py.meta -> scalestudy/ingest/fetch.py"""
    return str(meta.relative_to(repo / "mutants" / "src"))[: -len(".meta")]


def function_of(name: str) -> str:
    """scalestudy.derive.x_f__mutmut_3 -> x_f (mutmut's mangled name, the key of its hash_by_function_name)"""
    return name.rsplit("__mutmut_", 1)[0].rpartition(".")[2]


def load(path: Path) -> dict:
    """{"mutmut": version, "runs": [...], "modules": {module: {function: [hash, {mutant number: exit code}]}}}; an
    exit code null: not checked yet."""
    if not path.is_file():
        return empty()
    ledger = json.loads(path.read_text())
    # on disk each function's exit codes are a list, mutant n at n - 1 (mutmut numbers them from 1, no gaps)
    for functions in ledger["modules"].values():
        for function, (digest, codes) in functions.items():
            functions[function] = [digest, {str(n): code for n, code in enumerate(codes, start=1)}]
    if ledger.get("mutmut") != mutmut_version():  # another mutmut may number the mutants of a function otherwise
        print(f"note: {path.name} is of mutmut {ledger.get('mutmut')}, not {mutmut_version()}: not used")
        return empty()
    return ledger


def mutmut_version() -> str:
    from importlib.metadata import version

    return version("mutmut")


def prefix_of(module: str) -> str:
    """scalestudy/ingest/logs/__init__.py -> scalestudy.ingest.logs: the start of its mutants' names"""
    return module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def restore(ledger: dict, repo: Path) -> int:
    """Write the ledger's results as mutmut's meta files where mutants/ has none yet (a new checkout); mutmut keeps a
    result when it generates that function's mutants again with the same hash. Returns the results restored."""
    restored = 0
    for module, functions in ledger["modules"].items():
        meta = repo / "mutants" / "src" / f"{module}.meta"
        if meta.exists() or not (repo / "src" / module).is_file():
            continue
        codes = {f"{prefix_of(module)}.{function}__mutmut_{n}": code for function, (_, known) in functions.items()
                 for n, code in known.items()}  # fmt: skip
        hashes = {function: digest for function, (digest, _) in functions.items()}
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps({"exit_code_by_key": codes, "hash_by_function_name": hashes,
                                    "durations_by_key": {}, "estimated_durations_by_key": {}}))  # fmt: skip
        restored += len(codes)
    return restored


def record(ledger: dict, repo: Path, run: dict | None = None) -> dict:
    """The ledger with mutants/'s results merged in: a function of the same hash keeps the ledger's results that
    mutants/ has not checked; a function whose hash changed, or that is new, takes mutants/'s alone; modules and
    functions gone from src/ are dropped."""
    modules = {m: f for m, f in ledger["modules"].items() if (repo / "src" / m).is_file()}
    for meta in sorted((repo / "mutants" / "src").rglob("*.py.meta")):
        module = module_of(meta, repo)
        if not (repo / "src" / module).is_file():
            continue
        data = json.loads(meta.read_text())
        hashes = data.get("hash_by_function_name", {})
        old = modules.get(module, {})
        new = {}
        for function, digest in hashes.items():
            known = dict(old[function][1]) if function in old and old[function][0] == digest else {}
            for name, code in data["exit_code_by_key"].items():
                number = name.rsplit("__mutmut_", 1)[1]
                # unchecked ones too (null): the ledger alone then counts every mutant, for a report without mutants/
                if function_of(name) == function and (code is not None or number not in known):
                    known[number] = code
            new[function] = [digest, dict(sorted(known.items(), key=lambda item: int(item[0])))]
        modules[module] = new
    runs = ledger["runs"] + ([run] if run else [])
    return {"mutmut": ledger["mutmut"], "runs": runs, "modules": dict(sorted(modules.items()))}


def as_list(codes: dict[str, int | None]) -> list[int | None]:
    """{"1": 1, "3": 0} -> [1, None, 0]: mutant n at n - 1"""
    found = [None] * max(map(int, codes), default=0)
    for n, code in codes.items():
        found[int(n) - 1] = code
    return found


def save(ledger: dict, path: Path) -> None:
    """One line per function, so that a run's change to the committed file reads as a diff of those functions."""
    lines = ["{", f'  "mutmut": {json.dumps(ledger["mutmut"])},', '  "runs": [']
    lines += [f"    {json.dumps(run)}," for run in ledger["runs"]]
    lines[-1] = lines[-1].rstrip(",") if ledger["runs"] else lines[-1]
    lines += ["  ],", '  "modules": {']
    for i, (module, functions) in enumerate(ledger["modules"].items()):
        lines.append(f"    {json.dumps(module)}: {{")
        entries = [f"      {json.dumps(f)}: {json.dumps([digest, as_list(codes)], separators=(',', ':'))}"
                   for f, (digest, codes) in functions.items()]  # fmt: skip
        lines.append(",\n".join(entries))
        lines.append("    }" + ("," if i < len(ledger["modules"]) - 1 else ""))
    lines += ["  }", "}"]
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text("\n".join(line for line in lines if line) + "\n")
    json.loads(tmp.read_text())  # never a ledger that does not read back
    tmp.replace(path)


def statuses(ledger: dict) -> dict[str, dict[str, str]]:
    """{module: {mutant name: status}} from the ledger alone (a checkout without mutants/)."""
    return {module: {f"{prefix_of(module)}.{function}__mutmut_{n}": STATUS.get(code, "suspicious")
                     for function, (_, known) in functions.items() for n, code in known.items()}
            for module, functions in ledger["modules"].items()}  # fmt: skip
