"""Issue 25, the checks that need no running service: experiment names that are paths, and Hydra `_target_`s
outside the functions a figure, table or number may use (their end-to-end cases: tests/integration/
test_hardening_integration.py)."""

from __future__ import annotations

import pytest
from helpers import REPO

# --------------------------------------------------------------------------------------------
# 9. Experiment names that are paths


@pytest.mark.parametrize("name", ["../../../x", "a/b", "..", ".hidden", "x/../../y", "", "tab\\there"])
def test_an_experiment_name_that_is_a_path_is_refused(tmp_path, name):
    from scalestudy.schema import SchemaError
    from scalestudy.store import check_records

    with pytest.raises(SchemaError, match=r"^experiment name .*without '/' or '\.\.'"):
        check_records(name, [])


# --------------------------------------------------------------------------------------------
# 10. A Hydra override cannot make the builder call any function of the package


@pytest.mark.parametrize(
    "spec, key",
    [
        ({"_target_": "scalestudy.provenance.write_text", "target": "x", "text": "y"}, "derive"),
        ({"_target_": "scalestudy.derive.scaling", "x": {"_target_": "scalestudy.provenance.write_text"}}, "derive.x"),
        ({"_target_": "scalestudy.paper.figures.atomic_files"}, "derive"),  # imported there, defined elsewhere
        ({"_target_": "scalestudy.paper.numbers.build_numbers"}, "derive"),  # the builder's own entry point
        ({"_target_": "os.remove", "path": "x"}, "derive"),
    ],
    ids=["provenance", "nested", "imported-name", "entry-point", "stdlib"],
)
def test_a_target_outside_the_allowed_functions_is_refused_naming_the_key(tmp_path, spec, key):
    from scalestudy.config import call

    with pytest.raises(ValueError, match=rf"^conf/figure/f\.yaml {key}: {spec['_target_'] if key == 'derive' else ''}"):
        call(spec, where="conf/figure/f.yaml derive")
    assert not (REPO / "x").exists()
