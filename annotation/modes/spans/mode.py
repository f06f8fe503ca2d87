"""The error-spans mode: its parts wired together and registered.

``AnnotationConfig.ready()`` imports this module of every installed mode app, once the
models are ready (``apps.py`` says why the package itself imports nothing).
"""

from annotation.modes.base import Demo, register
from annotation.modes.capacity import workers_needed_by_unit
from annotation.modes.spans.browse import SpansBrowse
from annotation.modes.spans.dashboard import SpansDashboard
from annotation.modes.spans.export import SpansExport
from annotation.modes.spans.importers import SpanImporter
from annotation.modes.spans.judging import SpansJudging
from annotation.modes.spans.pages import SpansPages
from annotation.modes.spans.protocol import CAPTION, SpansProtocol
from annotation.modes.spans.report import SpansReport
from annotation.modes.spans.simulate import simulated_answers
from annotation.modes.spans.suggestions import SpanSuggestionsImporter


@register
class SpansMode(SpansProtocol):
    pages_class = SpansPages
    browse_class = SpansBrowse
    report_class = SpansReport
    judging_class = SpansJudging
    export_class = SpansExport
    dashboard_class = SpansDashboard
    importer_classes = (SpanImporter,)
    item_file_importer_classes = (SpanSuggestionsImporter,)
    kind_labels = {CAPTION: "Captions to mark"}
    # After the arena.
    menu_order = 50
    # Detailed captions (125-165 words) written for six of the demo's photographs, a
    # careful one (GoodBot, one planted minor error) and a careless one (BadBot, six to
    # eight); 12 captions x 3 annotators = 36 judgments, 6 workers answering 6 each. Up to 10
    # marks: the careless captions hold more errors than MQM's five.
    demo = Demo(
        live="Demo: Error spans in detailed captions",
        finished="Demo (finished): Error spans in detailed captions",
        finished_workers=6,
        settings={"target": 3, "max_spans": 10, "min_seconds": 20},
        item_words="detailed captions to mark",
        captions="spans_captions.csv",
    )
    simulate = simulated_answers

    def workers_needed(self, study):
        # Each caption is marked by ``target`` different annotators (issue 26).
        return workers_needed_by_unit(
            study,
            kinds=[CAPTION],
            unit="pk",
            rule="Each caption is marked by different annotators",
            what="a caption",
        )
