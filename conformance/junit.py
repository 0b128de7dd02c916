"""The JUnit XML report (``--junit``), for CI systems that read it.

One ``testsuite`` per collective, one ``testcase`` per case: a wrong result
is a ``failure`` (with the violation kind as its type), a hang or crash (a
backend that raised included) an ``error``, an unsupported, not applicable
(``n/a``, with the reason) or not-run case ``skipped`` (never a pass); a
known finding passes with its note in ``system-out``. Counting and
writing (atomically) are collspec.junit's.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from .. import junit


def document(conformance) -> ElementTree.Element:
    name = conformance.backend.name
    root = ElementTree.Element("testsuites", name=f"collspec conform {conformance.backend.text}")
    suites: dict[str, ElementTree.Element] = {}
    for outcome in conformance.outcomes:
        collective = outcome.case.collective if outcome.case else "setup"
        suite = suites.get(collective)
        if suite is None:
            suite = suites[collective] = ElementTree.SubElement(root, "testsuite", name=f"collspec.conform.{name}.{collective}")
        case = ElementTree.SubElement(suite, "testcase", classname=suite.get("name"), name=outcome.case.id if outcome.case else "setup")
        first = outcome.violations[0] if outcome.violations else None
        if outcome.status == "fail":
            ElementTree.SubElement(case, "failure", type=first.kind, message=first.message).text = "\n".join(str(v) for v in outcome.violations)
        elif outcome.status in ("hang", "crash"):
            ElementTree.SubElement(case, "error", type=first.kind, message=first.message).text = "\n".join(
                [str(first), *first.details.get("log", [])]
            )
        elif outcome.status == "n/a":
            ElementTree.SubElement(case, "skipped", type="n/a", message=f"not applicable: {outcome.note}")
        elif outcome.status in ("unsupported", "not-run"):
            ElementTree.SubElement(case, "skipped", message=first.message if first else "not run")
        elif outcome.status == "finding":
            ElementTree.SubElement(case, "system-out").text = "\n".join(f"{v}\nknown: {v.details['known']}" for v in outcome.violations)
    return junit.finish(root)


def write(conformance, path: str) -> None:
    junit.write(document(conformance), path)
