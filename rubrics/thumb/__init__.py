"""THumB 1.0 rubric: rules, validation and the per-system report.

Source: Kasai et al., "Transparent Human Evaluation for Image Captioning"
(NAACL 2022), as distilled in ``../shared/PROTOCOLS.md`` sections 0 and 1.

Scores of one caption:

* precision P and recall R, integers 1-5 (paper section 2.2.1);
* three penalties, stored as POSITIVE deductions (paper section 2.2.2):
  fluency (sum of the selected error types of paper Table 6), conciseness
  (0 or 0.5) and inclusive language (0, 0.5 or 2);
* Total = (P + R) / 2 - (fluency + conciseness + inclusive).

The THumB 1.0 release stores penalties as values <= 0; negate them before
calling anything here (the functions refuse negative penalties).

Where things are (every public name is re-exported here):

* ``rules``: one caption's rules and validation (``total``, ``normalise``, Table 6);
* ``guide``: the texts of the annotation guide (definitions, rules, Table 1 examples);
* ``scores``: many captions' scores as validated arrays (``CaptionJudgments``);
* ``estimators``: the report's statistics, each a small estimator with a frozen result;
* ``tables``: ``report``, the estimators composed into a frozen ``ThumbReport``;
* ``review``: the stage agreement, the third annotator's check, the developmental phase.

Choices this package makes where the paper is silent (documented where applied):

* a fluency error type is either selected or not for a caption (the paper's
  casing example "tv, christmas" is one selection covering two words); the
  caption's fluency penalty is the sum over the selected types;
* integral floats such as ``4.0`` are accepted as integer scores (the THumB 1.0
  release stores P and R as floats); ``True``/``False`` are refused;
* ``report`` uses nan-aware means when an image lacks a system's caption (see
  ``estimators.system_means``); undefined statistics are ``None``, never NaN;
* ``check_agreement`` counts a checked caption as changed when any of its fields
  differs from the final scores (the paper's "did not change the scores").
"""

from rubrics.thumb.guide import (
    EXAMPLES,
    PRECISION_DEFINITION,
    RECALL_DEFINITION,
    RULES,
    RubricExample,
    RubricRule,
)
from rubrics.thumb.review import (
    CheckAgreement,
    StageAgreement,
    check_agreement,
    check_sample,
    developmental_images,
    stage_agreement,
)
from rubrics.thumb.rules import (
    CONCISENESS_VALUES,
    FLUENCY_ERRORS,
    HUMAN_SYSTEM,
    INCLUSIVE_VALUES,
    MAX_FLUENCY_PENALTY,
    SCORE_VALUES,
    CaptionScores,
    FluencyError,
    fluency_penalty,
    normalise,
    total,
    validate_caption_scores,
)
from rubrics.thumb.scores import CaptionJudgments, ScoreArrays
from rubrics.thumb.tables import ThumbReport, report

__all__ = [
    "CONCISENESS_VALUES",
    "EXAMPLES",
    "FLUENCY_ERRORS",
    "HUMAN_SYSTEM",
    "INCLUSIVE_VALUES",
    "MAX_FLUENCY_PENALTY",
    "PRECISION_DEFINITION",
    "RECALL_DEFINITION",
    "RULES",
    "SCORE_VALUES",
    "CaptionJudgments",
    "CaptionScores",
    "CheckAgreement",
    "FluencyError",
    "RubricExample",
    "RubricRule",
    "ScoreArrays",
    "StageAgreement",
    "ThumbReport",
    "check_agreement",
    "check_sample",
    "developmental_images",
    "fluency_penalty",
    "normalise",
    "report",
    "stage_agreement",
    "total",
    "validate_caption_scores",
]
