from django.urls import path

from annotation.views import (
    crowd,
    dashboard,
    exports,
    health,
    imports,
    items,
    judges,
    metrics,
    participate,
    plan,
    preview,
    reports,
    studies,
)

urlpatterns = [
    path("", studies.home, name="home"),
    # Answered by HealthCheckMiddleware before Host checks; listed here for reverse().
    path("healthz", health.healthz, name="healthz"),
    path("studies/new/", studies.study_new, name="study_new"),
    path("studies/<int:study_id>/", studies.study_detail, name="study_detail"),
    path("studies/<int:study_id>/status/", studies.study_change_status, name="study_status"),
    path("studies/<int:study_id>/dashboard/", dashboard.study_dashboard, name="study_dashboard"),
    path("studies/<int:study_id>/people/", studies.study_people, name="study_people"),
    path("studies/<int:study_id>/settings/", studies.study_settings, name="study_settings"),
    path("studies/<int:study_id>/preview/", preview.study_preview, name="study_preview"),
    path("studies/<int:study_id>/close/", studies.study_close_confirm, name="study_close_confirm"),
    path(
        "studies/<int:study_id>/leases/<int:assignment_id>/release/",
        studies.study_release_lease,
        name="study_release_lease",
    ),
    path("studies/<int:study_id>/import/", imports.study_import, name="study_import"),
    path("studies/<int:study_id>/items/", items.study_items, name="study_items"),
    path("studies/<int:study_id>/export/", exports.study_export, name="study_export"),
    path("studies/<int:study_id>/report/", reports.study_report, name="study_report"),
    path(
        "studies/<int:study_id>/report/figures/<slug:name>.<str:fmt>",
        reports.report_figure,
        name="report_figure",
    ),
    path("studies/<int:study_id>/metrics/", metrics.study_metrics, name="study_metrics"),
    path(
        "studies/<int:study_id>/metrics/robustness/<str:kind>.svg",
        metrics.robustness_figure,
        name="study_metrics_robustness",
    ),
    path(
        "studies/<int:study_id>/metrics/references/",
        metrics.study_references,
        name="study_references",
    ),
    path("studies/<int:study_id>/plan/", plan.study_plan, name="study_plan"),
    path("studies/<int:study_id>/judges/", judges.study_judges, name="study_judges"),
    path(
        "studies/<int:study_id>/judges/settings/",
        judges.study_judge_settings,
        name="study_judge_settings",
    ),
    path(
        "studies/<int:study_id>/judges/prompt/",
        judges.study_judge_prompt,
        name="study_judge_prompt",
    ),
    path("studies/<int:study_id>/judges/run/", judges.study_judge_run, name="study_judge_run"),
    path(
        "studies/<int:study_id>/judges/runs/<int:job_id>/",
        judges.study_judge_job,
        name="study_judge_job",
    ),
    path(
        "studies/<int:study_id>/judges/runs/<int:job_id>/stop/",
        judges.study_judge_stop,
        name="study_judge_stop",
    ),
    path(
        "studies/<int:study_id>/plan/figure.svg", plan.study_plan_figure, name="study_plan_figure"
    ),
    path(
        "studies/<int:study_id>/metrics/jobs/<int:job_id>/",
        metrics.metrics_job,
        name="study_metrics_job",
    ),
    path("jobs/<int:job_id>/", studies.job_status, name="job_status"),
    path("jobs/<int:job_id>/download/", studies.job_download, name="job_download"),
    path("jobs/<int:job_id>/datasheet/", exports.job_datasheet, name="job_datasheet"),
    path("account/crowd/", crowd.account_crowd, name="account_crowd"),
    path("crowd/prolific/webhook/", crowd.prolific_webhook, name="prolific_webhook"),
    path("studies/<int:study_id>/crowd/", crowd.study_crowd_review, name="study_crowd_review"),
    path("studies/<int:study_id>/crowd/sync/", crowd.study_crowd_sync, name="study_crowd_sync"),
    path(
        "studies/<int:study_id>/crowd/ledger/<int:entry_id>/resolve/",
        crowd.study_crowd_resolve,
        name="study_crowd_resolve",
    ),
    path("p/<str:token>/", participate.crowd_entry, name="crowd_entry"),
    path("s/<uuid:public_id>/", participate.participate_intro, name="participate_intro"),
    path("s/<uuid:public_id>/next/", participate.participate_next, name="participate_next"),
    path(
        "s/<uuid:public_id>/submit/<str:token>/",
        participate.participate_submit,
        name="participate_submit",
    ),
]
