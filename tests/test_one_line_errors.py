"""Issue 25, case 7: every command fails through the project's error handler (src/scalestudy/cli.py): one line
naming the file or the argument, exit 2, no traceback. Each case once printed a traceback or a wrong number.
The cases with a running server, a full disk or a real store: tests/integration/test_one_line_errors_integration.py."""

from __future__ import annotations

import pytest
from helpers import run_here, run_module
from test_profile import PROFILES, TIMELINE, needs_profiles
from test_reliability import one_line_error

from scalestudy.profile import ProfileError, summarize

# ----------------------------------------------------------------------------------------------
# profile summarize on a timeline with garbage events

GARBAGE = [
    ('"ts": 1410488746885,', '"ts": "soon",', "event 2 ('i' 'CYCLE_START'): ts 'soon' is not a finite number"),
    ('"ts": 1410488746885,', '"ts": 1e400,', "event 2 ('i' 'CYCLE_START'): ts inf is not a finite number"),
    ('"ts": 1410488746885, "s": "g"}', '"ts": 1410488746885, "s": "g", "pid": [1]}',
     "event 2 ('i' 'CYCLE_START'): pid [1] is not a whole number"),
    # no ts (a metadata event has none), so its dur is checked next
    ('"ts": 1410488746885,', '"dur": "long",', "event 2 ('i' 'CYCLE_START'): dur 'long' is not a finite number"),
    # a long name: its first 40 characters
    ('"name": "CYCLE_START", "ts": 1410488746885,', f'"name": "{"N" * 39}ABC", "ts": "soon",',
     f"event 2 ('i' '{'N' * 39}A'): ts 'soon' is not a finite number"),
]  # fmt: skip


@needs_profiles
@pytest.mark.parametrize("old, new, expected", GARBAGE, ids=["string-ts", "ts-1e400", "list-pid", "dur", "long-name"])
def test_a_timeline_with_a_garbage_event_is_refused_naming_it(tmp_path, old, new, expected):
    text = (PROFILES / TIMELINE).read_text()
    assert text.count(old) == 1  # the second event of the real timeline (its line 3)
    bad = tmp_path / "timeline.json"
    bad.write_text(text.replace(old, new))
    with pytest.raises(ProfileError) as refused:
        summarize(bad)
    assert str(refused.value).startswith(f"{bad}: {expected}")


@needs_profiles
def test_the_profile_command_says_it_in_one_line(tmp_path):
    old, new, expected = GARBAGE[1]
    bad = tmp_path / "timeline.json"
    bad.write_text((PROFILES / TIMELINE).read_text().replace(old, new))
    proc = run_module("scalestudy.profile", "summarize", str(bad), uri="sqlite:///unused.db", check=False)
    one_line_error(proc, f"error: {bad}: {expected}")
    assert "span inf" not in proc.stdout


# ----------------------------------------------------------------------------------------------
# model predict with arguments that are not what they must be


@pytest.mark.parametrize(
    "argument, expected",
    [
        ("workers=0", "argument workers is 0, not a whole number >= 1"),
        ("workers=-1", "argument workers is -1, not a whole number >= 1"),
        ("workers=abc", "argument workers is 'abc', not a whole number"),
        ("workers=2.5", "argument workers is 2.5, not a whole number >= 1"),
        ("throughput_1gpu=-5", "argument throughput_1gpu (images/s) is -5, outside (0, inf)"),
        ("gpus_per_node=0", "argument gpus_per_node is 0, not a whole number >= 1"),
    ],
)
def test_model_predict_refuses_a_bad_argument_naming_it(argument, expected):
    from scalestudy.scaling.command_line import load_settings
    from scalestudy.schema import SchemaError

    with pytest.raises(SchemaError) as refused:
        load_settings(["model=vgg16", argument])
    assert str(refused.value) == expected


def test_the_model_command_says_it_in_one_line(tmp_path, monkeypatch, capsys):
    """Checked before the store is read (this store does not exist)."""
    proc = run_here("scalestudy.scaling", "predict", "model=vgg16", "workers=2.5",
                    uri=f"sqlite:///{tmp_path / 'none.db'}", monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    one_line_error(proc, "error: argument workers is 2.5, not a whole number >= 1")
    assert proc.stdout == ""


# ----------------------------------------------------------------------------------------------
# what scalestudy.cli.run does for the whole process when it is the process's command (and not for a test's call)

COMMAND = """
import gc, os, sys
from scalestudy.cli import run
def main(argv):
    print(os.environ.get("MLFLOW_DISABLE_TELEMETRY"), gc.get_freeze_count() > 0, argv)
    return int(argv[-1])
status = run(main, None if sys.argv[1] == "command" else sys.argv[2:])
print(gc.get_freeze_count() > 0, status)
"""


@pytest.mark.parametrize("env", [{}, {"MLFLOW_DISABLE_TELEMETRY": "false"}], ids=["unset", "set-by-the-user"])
def test_a_command_turns_mlflow_telemetry_off_unless_told_and_freezes_what_it_made_when_it_ends(env):
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if k != "MLFLOW_DISABLE_TELEMETRY"}

    def lines(*argv):
        proc = subprocess.run([sys.executable, "-c", COMMAND, *argv], env={**base, **env}, capture_output=True,
                              text=True, check=True)  # fmt: skip
        return proc.stdout.splitlines()

    told = env.get("MLFLOW_DISABLE_TELEMETRY", "true")
    # as the process's command (argv from sys.argv): telemetry off unless the user said, gc frozen after main only
    assert lines("command", "3") == [f"{told} False ['command', '3']", "True 3"]
    # called with argv (a test's in-process call): the process is left as it was
    assert lines("call", "4") == [f"{env.get('MLFLOW_DISABLE_TELEMETRY')} False ['4']", "False 4"]


@needs_profiles
def test_output_piped_into_a_reader_that_stops_ends_quietly():
    """`... | head -1`: the reader closes the pipe; the command stops with 141 (128 + SIGPIPE) and says nothing
    (it printed `error: [Errno 32] Broken pipe`)."""
    import subprocess
    import sys

    from helpers import REPO

    command = [sys.executable, "-m", "scalestudy.profile", "summarize", *[str(PROFILES / TIMELINE)] * 4, "--json"]
    with subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout.read(1) == b"["
        proc.stdout.close()  # as head does after its line
        err = proc.stderr.read()
    assert (proc.returncode, err) == (141, b"")
