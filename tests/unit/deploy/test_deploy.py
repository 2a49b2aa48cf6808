"""deploy/: the compose file, the Kubernetes manifests and the Dockerfile run pathgrade
commands that exist with flags that parse, on the ports the collector listens on, with
the realtime plane scaled out (its consumers share conversation turns)."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import asdict
from typing import Any
from unittest import mock

import kubernetes_validate
import promql_parser
import pytest
import yaml
from pathgrade.collector.config import CollectorConfig

from pathgrade.cli.main import build_parser
from tests.support.paths import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
COMPOSE_DEFAULT = re.compile(r"\$\{[A-Z_]+:-([^}]*)\}")  # ${VAR:-default}
K8S_VARIABLE = re.compile(r"\$\(([A-Z_]+)\)")  # $(VAR), expanded by Kubernetes from env
COLLECTOR_PORTS = tuple(CollectorConfig.model_fields[f].default for f in ("grpc_port", "http_port"))
K8S_VERSION = "1.30"  # the oldest Kubernetes the manifests are meant for
K8S_VALUES = {"KAFKA_BOOTSTRAP": "kafka-0:9092", "PATHGRADE_CLICKHOUSE": "http://u:p@ch:8123/db"}
STORE_BOXES = {"migrate", "store-writer", "realtime", "scorer", "exporter"}


def compose_services() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]


def kubernetes_objects() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((DEPLOY / "kubernetes" / "pathgrade.yaml").read_text()))


def pathgrade_containers() -> list[dict[str, Any]]:
    return [
        container
        for obj in kubernetes_objects()
        if obj["kind"] in ("Job", "Deployment", "StatefulSet")
        for container in obj["spec"]["template"]["spec"]["containers"]
    ]


def parsed(argv: list[str], environ: dict[str, str] | None = None) -> Any:
    """The pathgrade command line `argv` as the CLI parses it in a process with `environ`
    (SystemExit if it does not parse)."""
    with mock.patch.dict(os.environ, environ or {}, clear=True):
        return build_parser().parse_args(argv)


def compose_args(service: dict[str, Any]) -> Any:
    """A compose service's command, parsed with its environment (defaults resolved)."""
    environ = {k: COMPOSE_DEFAULT.sub(r"\1", str(v)) for k, v in service["environment"].items()}
    return parsed([COMPOSE_DEFAULT.sub(r"\1", str(w)) for w in service["command"]], environ)


def kubernetes_args(container: dict[str, Any]) -> Any:
    """A container's args, `$(VAR)` expanded from its env, parsed with that env."""
    environ = {e["name"]: K8S_VALUES[e["name"]] for e in container.get("env", [])}
    for word in container["args"]:
        for name in K8S_VARIABLE.findall(word):
            assert name in environ, f"{container['name']}: $({name}) is not in its env"
    argv = [K8S_VARIABLE.sub(lambda m: environ[m[1]], word) for word in container["args"]]
    assert "--clickhouse" not in argv  # the URL holds a password: from the environment
    return parsed(argv, environ)


def test_every_compose_box_runs_a_pathgrade_command_that_parses() -> None:
    services = compose_services()
    boxes = {name: s for name, s in services.items() if s.get("image") == "pathgrade:latest"}
    commands = {name: compose_args(s).command for name, s in boxes.items()}
    assert commands == {
        "topics": "topics", "migrate": "migrate", "collector": "collector",
        "store-writer": "store-writer", "realtime": "realtime", "scorer": "scorer", "ui": "ui",
        "exporter": "exporter",
    }  # fmt: skip
    assert services["exporter"]["profiles"] == ["export"]  # sent out only when asked
    for name, service in boxes.items():
        args = compose_args(service)
        if hasattr(args, "kafka"):
            assert args.kafka == "kafka:9092", name
        assert "--clickhouse" not in service["command"], name
        if name in STORE_BOXES:
            assert args.clickhouse == "http://pathgrade:pathgrade@clickhouse:8123/pathgrade"
    collector = compose_args(services["collector"])
    grpc, http = COLLECTOR_PORTS
    assert collector.listen_host == "0.0.0.0"
    assert services["collector"]["ports"] == [f"{grpc}:{grpc}", f"{http}:{http}"]
    spill = services["collector"]["volumes"][0].split(":")[1]
    assert str(collector.spill_dir) == spill  # the spill survives a container restart


def test_long_running_boxes_serve_metrics_where_their_pods_say_prometheus_scrapes() -> None:
    served = {}
    for obj in kubernetes_objects():
        if obj["kind"] not in ("Deployment", "StatefulSet"):
            continue
        annotations = obj["spec"]["template"]["metadata"].get("annotations", {})
        for container in obj["spec"]["template"]["spec"]["containers"]:
            listen = getattr(kubernetes_args(container), "metrics_listen", None)
            if listen is None:
                continue
            ports = {p["name"]: p["containerPort"] for p in container["ports"]}
            assert listen == ("0.0.0.0", ports["metrics"]), container["name"]
            assert annotations["prometheus.io/scrape"] == "true"
            assert int(annotations["prometheus.io/port"]) == ports["metrics"]
            served[container["name"]] = listen[1]
    assert served.keys() == {"collector", "store-writer", "realtime", "scorer"}


def test_every_kubernetes_container_runs_a_pathgrade_command_that_parses() -> None:
    commands = {c["name"]: kubernetes_args(c).command for c in pathgrade_containers()}
    for container in pathgrade_containers():
        if container["name"] in STORE_BOXES:  # the store's URL comes from the Secret
            assert kubernetes_args(container).clickhouse == K8S_VALUES["PATHGRADE_CLICKHOUSE"]
    assert commands == {
        "topics": "topics", "migrate": "migrate", "collector": "collector",
        "store-writer": "store-writer", "realtime": "realtime", "scorer": "scorer", "ui": "ui",
    }  # fmt: skip
    collector = next(c for c in pathgrade_containers() if c["name"] == "collector")
    ports = {p["name"]: p["containerPort"] for p in collector["ports"] if p["name"] != "metrics"}
    assert ports == dict(zip(("otlp-grpc", "otlp-http"), COLLECTOR_PORTS, strict=True))
    (service,) = [
        o
        for o in kubernetes_objects()
        if o["kind"] == "Service" and o["metadata"]["name"] == "pathgrade-collector"
    ]
    assert {p["targetPort"]: p["port"] for p in service["spec"]["ports"]} == ports
    args = kubernetes_args(collector)
    assert args.listen_host == "0.0.0.0"
    mount, facts = collector["volumeMounts"]
    assert str(args.spill_dir) == mount["mountPath"]  # the spill is on a persistent volume
    (statefulset,) = [o for o in kubernetes_objects() if o["kind"] == "StatefulSet"]
    assert [t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"]] == [
        mount["name"]
    ]
    # every replica fingerprints with the one fact key of the deployment, from a Secret
    assert str(args.facts_key_file.parent) == facts["mountPath"] and facts["readOnly"]
    (volume,) = statefulset["spec"]["template"]["spec"]["volumes"]
    assert volume["name"] == facts["name"] and volume["secret"]["secretName"]


def test_the_ui_box_serves_viewers_by_token_with_a_read_only_store_user() -> None:
    """Compose and Kubernetes run `pathgrade ui` on all interfaces, which the CLI allows
    only with a tokens file, mounted where the command reads it, and with the viewer's
    ClickHouse URL, not the writers'."""
    service = compose_services()["ui"]
    args = compose_args(service)
    assert args.listen == ("0.0.0.0", 8080) and service["ports"] == ["8080:8080"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in service["volumes"]}
    assert (DEPLOY / mounted[str(args.tokens_file)]).is_file()
    assert args.clickhouse.startswith("http://pathgrade_viewer:")
    viewer = compose_services()["viewer-user"]["command"][-1]
    assert "GRANT SELECT ON pathgrade.* TO pathgrade_viewer" in viewer
    assert "readonly = 2" in viewer
    (container,) = [c for c in pathgrade_containers() if c["name"] == "ui"]
    k8s = kubernetes_args(container)
    assert k8s.listen == ("0.0.0.0", 8080) and k8s.tokens_file.parent.as_posix() in {
        m["mountPath"] for m in container["volumeMounts"]
    }
    (secret,) = [e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"]]
    assert secret == "pathgrade-clickhouse-viewer"
    (ui_service,) = [
        o
        for o in kubernetes_objects()
        if o["kind"] == "Service" and o["metadata"]["name"] == "pathgrade-ui"
    ]
    assert ui_service["spec"]["ports"][0]["targetPort"] == container["ports"][0]["name"]


def test_the_kubernetes_objects_match_the_kubernetes_api_schemas() -> None:
    """Strict validation (unknown fields are errors) against the API's OpenAPI schemas
    shipped with kubernetes-validate: what `kubectl apply` would reject, caught here."""
    objects = kubernetes_objects()
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    broken = {**objects[-1], "spec": {**objects[-1]["spec"], "replica": 2}}  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_the_realtime_plane_is_scaled_out_with_shared_conversation_history() -> None:
    realtime = compose_services()["realtime"]
    assert realtime["deploy"]["replicas"] >= 2
    assert not compose_args(realtime).no_shared_history
    (deployment,) = [
        o for o in kubernetes_objects() if o["metadata"]["name"] == "pathgrade-realtime"
    ]
    assert deployment["spec"]["replicas"] >= 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert not kubernetes_args(container).no_shared_history
    topics = next(c for c in pathgrade_containers() if c["name"] == "topics")
    assert kubernetes_args(topics).partitions >= deployment["spec"]["replicas"]


def test_the_image_holds_every_package_the_distribution_installs() -> None:
    pyproject = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())
    folders = set(pyproject["tool"]["setuptools"]["package-dir"].values())
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert set(re.findall(r"^COPY (\w+) \1$", dockerfile, re.M)) == folders
    assert '\nENTRYPOINT ["pathgrade"]\n' in dockerfile


@pytest.mark.parametrize("argv", [["topics"], ["realtime", "--kafka", "k:1", "--bogus"]])
def test_the_checks_have_teeth(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parsed(argv)


def exported_metrics() -> set[str]:
    """Every metric name the production boxes serve: their counters' dataclass fields and
    the levels each `counters()` adds (kept in step with RealtimePlane.counters and
    Collector.counters by hand)."""
    from pathgrade.batch_plane.export.exporter import ExportStats
    from pathgrade.batch_plane.scoring.online import OnlineScorerStats
    from pathgrade.batch_plane.store.writer import StoreWriterStats
    from pathgrade.collector.counters import IngestCounters
    from pathgrade.realtime_plane.counters import MONITOR_TURNS, AssemblerStats, RealtimeCounters
    from pathgrade.realtime_plane.delays import MAX, P50, P99
    from pathgrade.realtime_plane.sinks import WebhookStats
    from pathgrade.schemas.stalls import STALLED, WRITE_FAILURES

    from pathgrade.web.metric_names import metric_name

    webhook = {f"webhook_{k}" for k in asdict(WebhookStats()) if k != "latest_error"}
    counters = {
        "collector": {
            *asdict(IngestCounters()), "spill_bytes", "log_bytes", "dead_letter_messages",
            WRITE_FAILURES, STALLED,
        },
        "store_writer": {*asdict(StoreWriterStats()), STALLED},
        "realtime": {
            *asdict(RealtimeCounters()), *asdict(AssemblerStats()), *webhook,
            "traces_held", "spans_held", "duplicates_suppressed", "alerts_rejected",
            P50, P99, MAX, MONITOR_TURNS,
        },
        "scorer": set(asdict(OnlineScorerStats())),
        "exporter": {k for k in asdict(ExportStats()) if k != "latest_error"},
    }  # fmt: skip
    return {metric_name(process, c) for process, names in counters.items() for c in names}


def test_prometheus_rules_parse_and_name_only_exported_metrics() -> None:
    document = yaml.safe_load((DEPLOY / "prometheus" / "pathgrade-rules.yaml").read_text())
    (group,) = document["groups"]
    exported = exported_metrics()
    assert {
        "pathgrade_collector_spill_bytes",
        "pathgrade_realtime_webhook_failed_total",
    } <= exported
    names = [rule["alert"] for rule in group["rules"]]
    assert len(names) == len(set(names)) >= 6
    for rule in group["rules"]:
        promql_parser.parse(rule["expr"])  # raises ValueError naming the syntax error
        used = set(re.findall(r"pathgrade_\w+", rule["expr"]))
        assert used and used <= exported, (rule["alert"], used - exported)
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


MONITOR_POLICY = REPO_ROOT / "examples" / "monitors" / "policy.yaml"
MONITOR_RULES = DEPLOY / "prometheus" / "pathgrade-monitor-rules.yaml"


def test_the_monitor_rules_are_the_example_policys_objectives_generated_and_parse() -> None:
    from pathgrade.detectors import load_policy
    from pathgrade.detectors.monitor_policy import bad_counter
    from pathgrade.realtime_plane.monitor_alerts import duration

    from pathgrade.web.monitor_rules import monitor_rules

    monitors = load_policy(MONITOR_POLICY).monitors
    relative = str(MONITOR_POLICY.relative_to(REPO_ROOT))
    assert MONITOR_RULES.read_text() == monitor_rules(monitors, relative), (
        "out of date: pathgrade monitors rules --policy examples/monitors/policy.yaml "
        "--out deploy/prometheus/pathgrade-monitor-rules.yaml"
    )
    (group,) = yaml.safe_load(MONITOR_RULES.read_text())["groups"]
    rules = group["rules"]
    pairs = [(m, p) for m in monitors.objectives for p in m.windows]
    assert len(rules) == len(pairs) == len({rule["alert"] for rule in rules})
    exported = exported_metrics()
    for rule, (monitor, pair) in zip(rules, pairs, strict=True):
        promql_parser.parse(rule["expr"])  # raises ValueError naming the syntax error
        assert (
            set(re.findall(r"pathgrade_\w+", rule["expr"]))
            == {"pathgrade_realtime_monitor_turns_total"}
            <= exported
        )
        counters = set(re.findall(r'counter="([^"]+)"', rule["expr"]))
        assert counters == {"turns", bad_counter(monitor.good, monitor.detector, monitor.budget)}
        limit = pair.burn_rate * (1 - monitor.objective)
        assert rule["expr"].count(f"> {limit:g}\n") == 2  # both windows
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}
        assert rule["labels"]["monitor"] == monitor.name
        assert rule["keep_firing_for"] == duration(monitors.resolve_after_s)  # as episodes
        if monitor.service:
            assert f'service="{monitor.service}"' in rule["expr"]
        by = "by (tenant, service)" if monitor.slice == "service" else "by (tenant)"
        assert rule["expr"].count(by) == 5


def test_the_compose_clickhouse_bounds_its_own_log_tables() -> None:
    """Every ClickHouse log table the embedded store's test lists gets a TTL on the server
    compose runs, through the config file it mounts (docs/scale.md)."""
    from xml.etree import ElementTree

    from tests.unit.batch_plane.store.test_system_tables import SYSTEM_LOGS

    config = DEPLOY / "clickhouse" / "system-logs.xml"
    mount = f"./clickhouse/{config.name}:/etc/clickhouse-server/config.d/{config.name}:ro"
    assert mount in compose_services()["clickhouse"]["volumes"]
    ttls = {log.tag: log.findtext("ttl") or "" for log in ElementTree.parse(config).getroot()}
    assert set(SYSTEM_LOGS) <= set(ttls)
    for log, ttl in ttls.items():
        assert re.fullmatch(r"(event|finish)_date \+ INTERVAL [1-7] DAY DELETE", ttl), log
