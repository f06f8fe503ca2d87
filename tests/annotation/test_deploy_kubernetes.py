"""The Kubernetes manifests of ``deploy/kubernetes`` (docs/deployment.md): linted, and the
same deployment as ``docker-compose.yml``.

The linter is kubernetes-validate in strict mode (unknown fields are errors) against the
schemas of one fixed Kubernetes version, over every manifest, the optional components and,
when kubectl is on the machine, what ``kubectl kustomize`` builds of them. The rest reads
the YAML: the app's containers get every variable the compose file's app services set and
run the same commands; beat is one pod; web is ready only when /healthz answers; no
Secret's value is written here; every pod runs as a non-root user on a read-only root.
"""

import shlex
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.annotation.test_deploy import OPERATOR_ENV, REPO, compose_service, compose_services

K8S = REPO / "deploy" / "kubernetes"
#: The oldest Kubernetes release still in its providers' support when this was written: the
#: manifests use nothing newer.
KUBERNETES_VERSION = "1.30.0"
#: The compose file's app services and the workloads that run them here.
WORKLOADS = {"migrate": "Job", "web": "Deployment", "worker": "Deployment", "beat": "Deployment"}
#: Variables the compose file sets that the cluster does not, each with its reason.
COMPOSE_ONLY: dict[str, str] = {}
#: Variables whose value must come from a Secret, never from a manifest: the compose file
#: requires them from the operator (``${VAR:?...}``), or they embed such a value.
SECRET_NAMES = {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY"}  # fmt: skip
#: ConfigMap values that differ from the compose file's defaults by design.
SITE_SPECIFIC = {
    "ALLOWED_HOSTS": "the Ingress's host, not the compose file's capeval.localhost",
    "CAPEVAL_S3_ENDPOINT_URL": "AWS S3 by default (empty), not the compose file's MinIO",
    "CAPEVAL_S3_REGION": "an AWS region, not MinIO's us-east-1",
}


def manifest_files() -> list[Path]:
    """Every Kubernetes object file here (kustomize's own files are not objects)."""
    return sorted(p for p in K8S.rglob("*.yaml") if p.name != "kustomization.yaml")


def objects() -> list[tuple[Path, dict]]:
    return [(path, doc) for path in manifest_files()
            for doc in yaml.safe_load_all(path.read_text()) if doc]  # fmt: skip


def workload(name: str) -> dict:
    (found,) = [d for _, d in objects() if (d["kind"], d["metadata"]["name"])
                == (WORKLOADS[name], name)]  # fmt: skip
    return found


def container(name: str) -> dict:
    (found,) = workload(name)["spec"]["template"]["spec"]["containers"]
    return found


def config_map() -> dict[str, str]:
    (found,) = [d for _, d in objects() if d["kind"] == "ConfigMap"]
    return found["data"]


def env_names(spec: dict) -> dict[str, str]:
    """Each variable a container gets, and where from ("value", "secret", "config")."""
    names = {}
    for source in spec.get("envFrom", []):
        assert source["configMapRef"]["name"] == "capeval-config", source
        names.update(dict.fromkeys(config_map(), "config"))
    for var in spec.get("env", []):
        names[var["name"]] = "secret" if "secretKeyRef" in var.get("valueFrom", {}) else "value"
    return names


def lint(document: dict) -> str:
    """The linter's complaint about one object, or ""."""
    try:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as e:
        return f"{document.get('kind')}/{document.get('metadata', {}).get('name')}: {e}"
    return ""


def test_every_manifest_passes_the_linter_in_strict_mode():
    assert len(manifest_files()) >= 9
    errors = [f"{path.relative_to(REPO)}: {lint(doc)}" for path, doc in objects() if lint(doc)]
    assert errors == []


def test_the_linter_refuses_what_a_cluster_would():
    """A linter that passes anything checks nothing: an unknown field and a wrong type."""
    web = workload("web")
    typo = {**web, "spec": {**web["spec"], "replica": 2}}
    wrong = {**web, "spec": {**web["spec"], "replicas": "two"}}
    assert lint(typo) and lint(wrong)


def test_the_kustomization_lists_every_manifest():
    listed = set()
    for kustomization in K8S.rglob("kustomization.yaml"):
        for resource in yaml.safe_load(kustomization.read_text()).get("resources", []):
            path = (kustomization.parent / resource).resolve()
            assert path.is_file(), f"{kustomization.relative_to(REPO)} lists {resource}"
            listed.add(path)
    assert listed == {p.resolve() for p in manifest_files()}, "a file kustomize never applies"


def test_what_kustomize_builds_passes_the_linter(tmp_path):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed; the files themselves are linted above")
    # The optional component switched on, as docs/deployment.md says to.
    for path in K8S.rglob("*.yaml"):
        (tmp_path / path.relative_to(K8S)).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path.relative_to(K8S)).write_text(path.read_text())
    main = tmp_path / "kustomization.yaml"
    main.write_text(main.read_text().replace("# components:\n#   - components/autoscale",
                                             "components:\n  - components/autoscale"))  # fmt: skip
    for root in (K8S, tmp_path):
        built = subprocess.run([kubectl, "kustomize", str(root)], capture_output=True,
                               text=True, timeout=60)  # fmt: skip
        assert built.returncode == 0, built.stderr
        documents = [d for d in yaml.safe_load_all(built.stdout) if d]
        assert [lint(d) for d in documents if lint(d)] == []
        assert {d["metadata"].get("namespace") for d in documents if d["kind"] != "Namespace"} == {
            "capeval"
        }
        kinds = {d["kind"] for d in documents}
    assert "HorizontalPodAutoscaler" in kinds
    (web,) = [d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"] == "web"]
    assert "replicas" not in web["spec"], "apply would reset what the autoscaler chose"


@pytest.mark.parametrize("name", WORKLOADS)
def test_the_app_containers_get_every_variable_the_compose_file_sets(name):
    compose_env = set(compose_services()[name]["environment"])
    cluster = env_names(container(name))

    assert set(cluster) == compose_env - set(COMPOSE_ONLY)
    from_manifests = {var for var, source in cluster.items() if source != "secret"}
    assert from_manifests & SECRET_NAMES == set(), "a secret written into a manifest"


def test_the_config_map_holds_the_compose_files_defaults():
    defaults = compose_service("web", OPERATOR_ENV)["environment"]
    differ = {
        var: (value, defaults[var])
        for var, value in config_map().items()
        if var not in SITE_SPECIFIC and str(defaults[var]) != value
    }
    assert differ == {}
    assert config_map()["CAPEVAL_TRUSTED_PROXIES"] == "1", "the Ingress controller is a proxy"


def test_every_secret_is_referenced_never_written():
    assert [d for _, d in objects() if d["kind"] == "Secret"] == []
    for name in WORKLOADS:
        spec = workload(name)["spec"]["template"]["spec"]
        for each in spec.get("initContainers", []) + spec["containers"]:
            for var in each.get("env", []):
                if var["name"] in SECRET_NAMES:
                    reference = var["valueFrom"]["secretKeyRef"]
                    assert reference == {"name": "capeval-secrets", "key": var["name"]}, var


@pytest.mark.parametrize("name", WORKLOADS)
def test_the_containers_run_the_compose_files_commands(name):
    assert container(name)["command"] == shlex.split(compose_services()[name]["command"])


def test_web_is_ready_when_healthz_answers_and_runs_two_replicas():
    web = container("web")
    probe = web["readinessProbe"]["httpGet"]
    compose_check = " ".join(compose_services()["web"]["healthcheck"]["test"])
    (port,) = web["ports"]

    assert probe["path"] == "/healthz" and f":{port['containerPort']}/healthz" in compose_check
    assert probe["port"] in (port["name"], port["containerPort"])
    assert workload("web")["spec"]["replicas"] >= 2
    assert workload("worker")["spec"]["replicas"] >= 2


def test_the_worker_is_checked_as_the_compose_file_checks_it():
    test = compose_service("worker", OPERATOR_ENV)["healthcheck"]["test"]
    assert test[0] == "CMD-SHELL"
    assert container("worker")["livenessProbe"]["exec"]["command"] == ["sh", "-c", test[1]]


def test_exactly_one_beat_and_never_two_during_an_update():
    beat = workload("beat")["spec"]
    assert beat["replicas"] == 1
    assert beat["strategy"] == {"type": "Recreate"}
    scaled = {d["spec"]["scaleTargetRef"]["name"] for _, d in objects()
              if d["kind"] == "HorizontalPodAutoscaler"}  # fmt: skip
    assert "beat" not in scaled


@pytest.mark.parametrize("name", WORKLOADS)
def test_every_pod_runs_as_a_non_root_user_on_a_read_only_root_within_limits(name):
    spec = workload(name)["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    # The image's USER is a name; only a number lets the kubelet prove it is not root.
    assert spec["securityContext"]["runAsUser"] > 0
    mounted = set()
    for each in spec.get("initContainers", []) + spec["containers"]:
        security = each["securityContext"]
        assert security["readOnlyRootFilesystem"] is True, each["name"]
        assert security["allowPrivilegeEscalation"] is False, each["name"]
        assert security["capabilities"]["drop"] == ["ALL"], each["name"]
        assert each["resources"]["requests"]["memory"] and each["resources"]["limits"]["memory"]
        mounted |= {mount["mountPath"] for mount in each.get("volumeMounts", [])}
    assert "/tmp" in mounted, "uploads and jobs write temporary files"
    claims = [v for v in spec.get("volumes", []) if "persistentVolumeClaim" in v]
    assert claims == [], "a replica keeps nothing on a disk of its own"
