"""Accessibility checks with axe-core, injected into the page under test.

axe-core comes from npm (``package.json``; ``npm ci`` installs it under ``node_modules``).
Serious and critical violations fail the test; moderate and minor ones are reported as
warnings in pytest's summary so they stay visible without blocking.
"""

import warnings
from pathlib import Path

import pytest

AXE_SCRIPT = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING_IMPACTS = {"serious", "critical"}
# axe leaves these "needs review" because a script might still add the missing element. Our
# pages are checked once they are complete, so for them "needs review" is a violation: an
# aria-describedby naming no element silently drops a field's help text.
REVIEW_AS_VIOLATION = ["aria-valid-attr-value"]

# Only the fields the report needs travel back from the page.
RUN_AXE = """async (reviewAsViolation) => {
  const results = await axe.run(document, {resultTypes: ['violations']});
  const promoted = results.incomplete.filter((r) => reviewAsViolation.includes(r.id));
  return [...results.violations, ...promoted].map((v) => ({
    id: v.id,
    impact: v.impact,
    help: v.help,
    helpUrl: v.helpUrl,
    nodes: v.nodes.map((n) => ({target: n.target.flat().join(' '), summary: n.failureSummary})),
  }));
}"""


class AccessibilityWarning(UserWarning):
    """A moderate or minor axe-core finding: worth fixing, not worth failing a test."""


def axe_violations(page) -> list[dict]:
    """Run axe-core on the page as it is now and return its violations."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        # Evaluated through the DevTools protocol, which the page's Content-Security-Policy
        # does not govern: a <script> tag (add_script_tag) would be inline script, refused.
        page.evaluate("() => {\n" + AXE_SCRIPT.read_text() + "\n}")
    return page.evaluate(RUN_AXE, REVIEW_AS_VIOLATION)


#: WCAG 2.2 level AA, as axe tags it: every A and AA rule of 2.0, 2.1 and 2.2 (axe has no
#: "wcag22a" rule yet; its 2.2 A criteria are covered by the 2.0 and 2.1 rules).
WCAG22_AA_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]

RUN_AXE_TAGS = """async ([tags, reviewAsViolation]) => {
  const results = await axe.run(document, {
    runOnly: {type: 'tag', values: tags}, resultTypes: ['violations'],
  });
  const promoted = results.incomplete.filter((r) => reviewAsViolation.includes(r.id));
  return [...results.violations, ...promoted].map((v) => ({
    id: v.id,
    impact: v.impact,
    help: v.help,
    helpUrl: v.helpUrl,
    nodes: v.nodes.map((n) => ({target: n.target.flat().join(' '), summary: n.failureSummary})),
  }));
}"""


def axe_wcag22_violations(page) -> list[dict]:
    """Every violation of the WCAG 2.2 AA rules on the page as it is now, of any impact.

    For pages held to WCAG 2.2 AA as a whole (issue 43's screen-reader-first pages): a
    moderate or minor finding is a failure of the criterion all the same, so none is left
    as a warning. Assert the list is empty; ``describe`` words each entry.
    """
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate("() => {\n" + AXE_SCRIPT.read_text() + "\n}")
    return page.evaluate(RUN_AXE_TAGS, [WCAG22_AA_TAGS, REVIEW_AS_VIOLATION])


def reasons(failure_summary: str | None) -> str:
    """axe's "Fix any of the following:" lists without the headings, on one line."""
    lines = (line.strip() for line in (failure_summary or "").splitlines())
    return "; ".join(line for line in lines if line and not line.startswith("Fix "))


def describe(violation: dict) -> str:
    targets = "\n".join(
        f"    {node['target']}: {reasons(node['summary'])}" for node in violation["nodes"]
    )
    return (
        f"  [{violation['impact']}] {violation['id']}: {violation['help']} "
        f"({violation['helpUrl']})\n{targets}"
    )


def assert_no_serious_a11y_violations(page, context: str = "") -> list[dict]:
    """Fail listing every serious or critical axe-core violation on the current page.

    ``context`` names the page state in the message ("import page after upload"). Returns the
    lesser violations, which are also emitted as ``AccessibilityWarning``.
    """
    where = f"{context} ({page.url})" if context else page.url
    violations = axe_violations(page)
    blocking = [v for v in violations if v["impact"] in BLOCKING_IMPACTS]
    lesser = [v for v in violations if v["impact"] not in BLOCKING_IMPACTS]
    for violation in lesser:
        warnings.warn(f"axe on {where}:\n{describe(violation)}", AccessibilityWarning, stacklevel=2)
    if blocking:
        details = "\n".join(describe(v) for v in blocking)
        pytest.fail(
            f"axe-core found serious accessibility violations on {where}:\n{details}", pytrace=False
        )
    return lesser
