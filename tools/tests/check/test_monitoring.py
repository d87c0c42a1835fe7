"""Monitoring (issue 35) through `konfig check` on small real repositories: a monitor of a
port the Service does not expose, an alert whose PromQL does not parse and a prod stack
without monitoring each fail the check (exit 1) at the line of main.k; the PromQL rule is
also a pre-write refusal of preview and apply."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fixtures.repos import KonfigRunner, RepoBuilder

from konfig.build.compiler import compile_input, compile_one
from konfig.check.promql import MAX_EXPRESSION, RULE, parse_error
from konfig.pipeline.refusals import first_refusal
from konfig.repo.layout import discover
from konfig.spec import Spec

MAIN = """\
import base.pkg.models.frontend

app: frontend.Server {{
    name = "web"
    namespace = "shop-{env}"
    image = "nginx:1.27.3"
    replicas = 2
    disruptionBudget = {{minAvailable = 1}}
    ports = [{{port = 80, targetPort = 8080, name = "http"}}]
    monitoring = {{
        port = {port}
        errorRate = {{}}
        alerts = [
            {{name = "WebDown", expr = "{expr}"}}
        ]
    }}
}}
"""
GOOD_EXPR = 'up{job=\\"web\\"} == 0'


def stack(builder: RepoBuilder, env: str = "dev", **kwargs: str) -> None:
    fields = {"env": env, "port": '"http"', "expr": GOOD_EXPR} | kwargs
    builder.stack("shop", env, main=MAIN.format(**fields))


def check(konfig: KonfigRunner, builder: RepoBuilder) -> tuple[int, list[dict[str, Any]]]:
    result = konfig("check", "--format", "json", cwd=builder.root)
    assert result.code in (0, 1), result.err
    data: list[dict[str, Any]] = json.loads(result.out)
    return result.code, data


def test_a_monitored_server_checks_clean_in_dev_and_prod(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    stack(repo_builder, "dev")
    stack(repo_builder, "prod")
    assert check(konfig, repo_builder) == (0, [])


def test_a_port_the_service_does_not_expose_fails_at_main_k(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    stack(repo_builder, port="9090")
    code, data = check(konfig, repo_builder)
    assert code == 1
    [finding] = data
    assert finding["rule"] == "compile/error"
    assert (finding["file"], finding["line"]) == ("appops/shop/dev/main.k", 3)
    assert "monitoring.port 9090 is not a port the Service 'web' exposes" in finding["message"]
    assert "use one of [80] or their names [http]" in finding["message"]


def test_an_expression_that_is_not_promql_fails_at_its_line(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    stack(repo_builder, expr="sum(rate(http_requests_total[5m]) > 1")
    code, data = check(konfig, repo_builder)
    assert code == 1
    [finding] = data
    assert finding["rule"] == RULE
    assert (finding["file"], finding["line"]) == ("appops/shop/dev/main.k", 14)
    assert finding["resource"] == "monitoring.coreos.com/v1:PrometheusRule:shop-dev:web"
    assert (
        "the expression of 'WebDown' is not PromQL: unclosed left parenthesis"
        in (finding["message"])
    )


CRON = """\
import base.pkg.models.frontend

nightly: frontend.CronJob {{
    name = "nightly"
    namespace = "shop-dev"
    image = "busybox:1.36.1"
    schedule = "0 3 * * *"
    monitoring = {{
        failed = {{severity = "critical"}}
        noRecentSuccess = {{}}
        alerts = [
            {{name = "NightlyStuck", expr = "{expr}"}}
        ]
    }}
}}
"""


def test_a_cron_jobs_alerts_check_clean_and_a_bad_one_fails_at_its_line(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    good = 'kube_job_status_active{namespace=\\"shop-dev\\"} > 0'
    repo_builder.stack("shop", "dev", main=CRON.format(expr=good))
    assert check(konfig, repo_builder) == (0, [])
    repo_builder.stack("shop", "dev", main=CRON.format(expr="kube_job_status_active >"))
    code, data = check(konfig, repo_builder)
    assert code == 1
    [finding] = data
    assert finding["rule"] == RULE
    assert (finding["file"], finding["line"]) == ("appops/shop/dev/main.k", 12)
    assert finding["resource"] == "monitoring.coreos.com/v1:PrometheusRule:shop-dev:nightly"
    assert "the expression of 'NightlyStuck' is not PromQL" in finding["message"]


def test_a_prod_stack_without_monitoring_fails_unless_switched_off_with_a_reason(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    main = MAIN.format(env="prod", port='"http"', expr=GOOD_EXPR)
    start = main.index("    monitoring = {")
    unmonitored = main[:start] + main[main.index("    }\n}", start) + 6 :]
    assert "monitoring" not in unmonitored
    repo_builder.stack("shop", "prod", main=unmonitored)
    code, data = check(konfig, repo_builder)
    assert code == 1
    assert [(f["rule"], f["file"], f["line"], f["resource"]) for f in data] == [
        ("policy/prod-monitoring", "appops/shop/prod/main.k", 4, "apps/v1:Deployment:shop-prod:web")
    ]
    assert "is not monitored in a prod stack" in data[0]["message"]
    # the same Server in dev is fine
    repo_builder.stack("shop", "dev", main=unmonitored.replace("shop-prod", "shop-dev"))
    assert check(konfig, repo_builder)[1] == data
    # switched off per stack, with a reason
    repo_builder.write(
        "appops/shop/prod/stack.yaml",
        "name: prod\npolicies:\n  disable:\n    - rule: prod-monitoring\n"
        "      reason: the image serves no metrics yet\n",
    )
    assert check(konfig, repo_builder) == (0, [])


def test_the_promql_rule_refuses_preview_and_apply(repo_builder: RepoBuilder) -> None:
    stack(repo_builder, expr="rate(x[5m]) >")
    repo = discover(repo_builder.root)
    [target] = repo.stacks
    result = compile_one(compile_input(repo, target))
    assert isinstance(result.spec, Spec), result.error
    refusal = first_refusal(repo, target, result.spec)
    assert refusal is not None
    assert (refusal.file, refusal.line) == ("appops/shop/dev/main.k", 14)
    assert "is not PromQL" in refusal.preview
    assert refusal.apply.startswith(
        "appops/shop/dev/main.k:14: appops/shop/dev: nothing was applied"
    )


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ('sum by (le) (rate(x_bucket{a="b"}[5m]))', None),
        ("histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m]))) > 0.3", None),
        ("up == ", "invalid promql query"),
        ("rate(x[5 minutes])", "unexpected character inside brackets"),
        ("up{job=web}", "unexpected identifier 'web' in label matching"),
    ],
)
def test_parse_error(expr: str, reason: str | None) -> None:
    got = parse_error(expr)
    assert (got is None) if reason is None else (got is not None and reason in got), got


def test_an_expression_too_long_is_refused_unparsed() -> None:
    # nested this deep the parser would recurse past its stack: never handed to it
    deep = "(" * 30000 + "up" + ")" * 30000
    assert parse_error(deep) == (
        f"it is {len(deep)} characters long, more than the {MAX_EXPRESSION} konfig parses"
    )
    near = "(" * 2040 + "up" + ")" * 2040
    assert len(near) <= MAX_EXPRESSION and parse_error(near) is None
