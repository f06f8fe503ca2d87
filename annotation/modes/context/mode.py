"""The context mode: its parts wired together and registered.

``AnnotationConfig.ready()`` imports this module of every installed mode app, once the
models are ready (``apps.py`` says why the package itself imports nothing).
"""

from annotation.modes.base import register
from annotation.modes.context.captions import PURPOSES, ContextCaptionColumns
from annotation.modes.context.dashboard import ContextDashboard
from annotation.modes.context.export import ContextExport
from annotation.modes.context.judging import ContextJudging
from annotation.modes.context.pages import ContextPages
from annotation.modes.context.protocol import BLV, SIGHTED, ContextProtocol
from annotation.modes.context.report import ContextReport
from annotation.modes.context.simulate import simulated_answers


@register
class ContextMode(ContextProtocol):
    pages_class = ContextPages
    dashboard_class = ContextDashboard
    caption_purposes = PURPOSES
    caption_columns_class = ContextCaptionColumns
    report_class = ContextReport
    export_class = ContextExport
    judging_class = ContextJudging
    menu_order = 60
    kind_labels = {BLV: "For blind or low-vision raters", SIGHTED: "For sighted raters"}
    simulate = simulated_answers
