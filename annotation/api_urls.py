from django.urls import path

from annotation import apis
from annotation.views import crowd_api, guidelines, items, study_data_api
from annotation.views.api_root import ApiRootApi
from annotation.views.judges import StudyJudgeRunsApi, StudyJudgeRunStopApi, StudyJudgesApi
from annotation.views.people_design_api import StudyPeopleDesignApi
from annotation.views.plan_judge_api import StudyPlanJudgeApi

urlpatterns = [
    path("", ApiRootApi.as_view(), name="api_root"),
    path("studies/", apis.StudyListApi.as_view(), name="api_studies"),
    path("studies/<int:study_id>/", apis.StudyDetailApi.as_view(), name="api_study"),
    path(
        "studies/<int:study_id>/guidelines/",
        guidelines.StudyGuidelinesApi.as_view(),
        name="api_study_guidelines",
    ),
    path("studies/<int:study_id>/open/", apis.StudyOpenApi.as_view(), name="api_study_open"),
    path("studies/<int:study_id>/close/", apis.StudyCloseApi.as_view(), name="api_study_close"),
    path("studies/<int:study_id>/reopen/", apis.StudyReopenApi.as_view(), name="api_study_reopen"),
    path("modes/", apis.ModeListApi.as_view(), name="api_modes"),
    path("studies/<int:study_id>/jobs/", apis.StudyJobsApi.as_view(), name="api_study_jobs"),
    path(
        "studies/<int:study_id>/exports/", apis.StudyExportsApi.as_view(), name="api_study_exports"
    ),
    path(
        "studies/<int:study_id>/metrics/", apis.StudyMetricsApi.as_view(), name="api_study_metrics"
    ),
    path("studies/<int:study_id>/report/", apis.StudyReportApi.as_view(), name="api_study_report"),
    path("studies/<int:study_id>/plan/", apis.StudyPlanApi.as_view(), name="api_study_plan"),
    path(
        "studies/<int:study_id>/plan/judge/",
        StudyPlanJudgeApi.as_view(),
        name="api_study_plan_judge",
    ),
    path("studies/<int:study_id>/judges/", StudyJudgesApi.as_view(), name="api_study_judges"),
    path(
        "studies/<int:study_id>/people-design/",
        StudyPeopleDesignApi.as_view(),
        name="api_study_people_design",
    ),
    path("studies/<int:study_id>/items/", items.StudyItemsApi.as_view(), name="api_study_items"),
    path(
        "studies/<int:study_id>/judgments/",
        items.StudyJudgmentsApi.as_view(),
        name="api_study_judgments",
    ),
    path(
        "studies/<int:study_id>/judges/runs/",
        StudyJudgeRunsApi.as_view(),
        name="api_study_judge_runs",
    ),
    path(
        "studies/<int:study_id>/judges/runs/<int:job_id>/stop/",
        StudyJudgeRunStopApi.as_view(),
        name="api_study_judge_run_stop",
    ),
    path(
        "studies/<int:study_id>/imports/",
        study_data_api.StudyImportApi.as_view(),
        name="api_study_imports",
    ),
    path(
        "studies/<int:study_id>/references/",
        study_data_api.StudyReferencesApi.as_view(),
        name="api_study_references",
    ),
    path(
        "studies/<int:study_id>/people/",
        study_data_api.StudyPeopleApi.as_view(),
        name="api_study_people",
    ),
    path("jobs/<int:job_id>/", apis.JobDetailApi.as_view(), name="api_job"),
    path("jobs/<int:job_id>/file/", apis.JobFileApi.as_view(), name="api_job_file"),
    path(
        "studies/<int:study_id>/crowd/",
        crowd_api.StudyCrowdPanelApi.as_view(),
        name="api_study_crowd",
    ),
    path(
        "studies/<int:study_id>/crowd/sync/",
        crowd_api.StudyCrowdSyncApi.as_view(),
        name="api_study_crowd_sync",
    ),
    path(
        "studies/<int:study_id>/crowd/review/",
        crowd_api.StudyCrowdReviewApi.as_view(),
        name="api_study_crowd_review",
    ),
    path(
        "studies/<int:study_id>/crowd/ledger/",
        crowd_api.StudyCrowdLedgerApi.as_view(),
        name="api_study_crowd_ledger",
    ),
]
