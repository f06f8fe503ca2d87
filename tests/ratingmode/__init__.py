"""A tiny protocol used only by the tests of the mode-agnostic core, built by the recipe of
``docs/architecture.md`` ("How to add a mode") exactly as a real mode is.

"test-rating": one item per caption, each answered with a whole-number ``rating`` from 1 to
5, in ``parts`` consecutive parts, no faster than ``min_seconds`` per part. Importing this
package registers the mode (``tests/conftest.py`` does, and puts its template folder on the
template path).
"""

from annotation.modes import register
from tests.ratingmode.export import RatingExport
from tests.ratingmode.pages import RatingPages
from tests.ratingmode.protocol import NAME, RatingProtocol, RatingSettings
from tests.ratingmode.report import RatingReport

__all__ = ["NAME", "RatingSettings", "RatingTestMode"]


@register
class RatingTestMode(RatingProtocol):
    pages_class = RatingPages
    report_class = RatingReport
    export_class = RatingExport
