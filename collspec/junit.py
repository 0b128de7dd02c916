"""JUnit XML, the test report most CI systems display (GitLab, Jenkins,
GitHub through a reporter action, Azure Pipelines).

:func:`finish` and :func:`write` serve every report collspec writes
(``conform --junit`` builds its own cases in collspec.conformance.junit);
:func:`files_document` is the report of ``check`` and ``prove --schedule``:
one ``testcase`` per file, a check that failed a ``failure`` (type: the
first violation's kind; text: the report's text), a malformed file an
``error`` of type ``malformed``, an internal error one of type
``internal-error``; warnings of a file that holds go to ``system-out``.
:func:`proofs_document` is the report of ``prove``: one testcase per proof
row. Files are written atomically.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from .report import write_text


def finish(root: ElementTree.Element) -> ElementTree.Element:
    """Set ``tests``, ``failures``, ``errors`` and ``skipped`` on the root
    and on every ``testsuite``, counted from their testcases."""
    for suite in [root, *root.iter("testsuite")]:
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for case in suite.iter("testcase"):
            counts["tests"] += 1
            for tag, key in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
                counts[key] += case.find(tag) is not None
        for key, value in counts.items():
            suite.set(key, str(value))
    return root


def write(root: ElementTree.Element, path: str) -> None:
    """The counted document, indented, to ``path`` ('-': stdout), atomically."""
    finish(root)
    ElementTree.indent(root)
    write_text(ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n", path)


def files_document(command: str, results) -> ElementTree.Element:
    """One testsuite ``collspec.<command>``, one testcase per file result."""
    root = ElementTree.Element("testsuites", name=f"collspec {command}")
    suite = ElementTree.SubElement(root, "testsuite", name=f"collspec.{command}")
    for result in results:
        report = result.report
        case = ElementTree.SubElement(suite, "testcase", classname=suite.get("name"), name=result.path)
        seconds = report.stats.get("seconds") if isinstance(report.stats, dict) else None
        if isinstance(seconds, (int, float)):
            case.set("time", f"{seconds:.3f}")
        text = "\n".join(str(v) for v in report.violations)
        if result.status == 3:
            ElementTree.SubElement(case, "error", type="internal-error", message=result.error).text = result.error
        elif result.status == 2:
            ElementTree.SubElement(case, "error", type="malformed", message=result.error).text = result.error
        elif result.status == 1:
            first = next(v for v in report.violations if v.is_error)
            ElementTree.SubElement(case, "failure", type=first.kind, message=first.message).text = text
        elif report.violations:
            ElementTree.SubElement(case, "system-out").text = text
    return root


def proofs_document(name: str, results) -> ElementTree.Element:
    """One testsuite ``collspec.prove``, one testcase per proof row: a
    proof that failed or was undecided is a ``failure`` (type: its result)
    with its message and counterexample."""
    root = ElementTree.Element("testsuites", name=name)
    suite = ElementTree.SubElement(root, "testsuite", name="collspec.prove")
    for result in results:
        case = ElementTree.SubElement(suite, "testcase", classname="collspec.prove", name=result.name, time=f"{result.seconds:.3f}")
        if not result.ok:
            text = f"{result.name} ({result.scope}) {result.status}: {result.message}"
            if result.counterexample:
                text += "\n" + ", ".join(f"{k}={v}" for k, v in result.counterexample.items())
            ElementTree.SubElement(case, "failure", type=result.status, message=result.message).text = text
        else:
            ElementTree.SubElement(case, "system-out").text = f"{result.scope}: {result.status}"
    return root
