from django.urls import path

from annotation import apis

urlpatterns = [
    path("studies/", apis.StudyListApi.as_view(), name="api_studies"),
    path("studies/<int:study_id>/", apis.StudyDetailApi.as_view(), name="api_study"),
    path("jobs/<int:job_id>/", apis.JobDetailApi.as_view(), name="api_job"),
]
