"""The context mode: its parts wired together and registered.

``AnnotationConfig.ready()`` imports this module of every installed mode app, once the
models are ready (``apps.py`` says why the package itself imports nothing).
"""

from annotation.modes.base import Demo, register
from annotation.modes.context.captions import CONTEXT, PURPOSES, ContextCaptionColumns
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
    # The demo photographs' 48 descriptions, each in two contexts written for the demo
    # (annotation/demo/context_contexts.csv): 96 descriptions in context per group. Two
    # ratings per group and item keep the finished study small; its 20 simulated workers
    # fall into both groups by their seeds and can fill it (a worker rates each
    # description once, and at most 60 answers: 30 items of a sighted rater).
    demo = Demo(
        live="Demo: descriptions in context",
        finished="Demo (finished): descriptions in context",
        finished_workers=20,
        settings={"blv_ratings": 2, "sighted_ratings": 2},
        captions="captions.csv",
        extra_captions=(("context_contexts.csv", CONTEXT),),
        item_words="descriptions in one context for one group of raters",
    )
    kind_labels = {BLV: "For blind or low-vision raters", SIGHTED: "For sighted raters"}
    simulate = simulated_answers
