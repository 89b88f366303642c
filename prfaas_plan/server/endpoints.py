"""The API's use-cases, one function each: a request body (server/bodies.py) in, the command's
view and JSON document out (an Answer, each built when asked for), through the same use_cases/
and render/ functions as the CLI. An endpoint is registered by `@endpoint(name, Body)`;
server/app.py serves each at POST /api/v1/<name>. Adding a command is one more such function."""

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from prfaas_plan.errors import ConfigError
from prfaas_plan.export.build import build_export
from prfaas_plan.export.manifest import file_texts
from prfaas_plan.export.plan_source import plan_from_scenario
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.reading import Strict
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import Problem, build_problem, load_scenario
from prfaas_plan.inputs.scenario_schema import ObservedLengthsFile, Scenario
from prfaas_plan.inputs.workload_files import MetricsLengths
from prfaas_plan.render.views import Document, View, render_markdown
from prfaas_plan.server import bodies
from prfaas_plan.server.naming import CASE_STUDY_NAME

if TYPE_CHECKING:
    from prfaas_plan.use_cases.plan import PlanReport

B = TypeVar("B", bound=Strict)
Handler = Callable[[B, Catalog], "Answer"]
REQUEST_SOURCE = Path("request")  # how messages and `inputs.scenario_file` name a body's scenario


FORMATS = ("json", "markdown")  # what every endpoint answers in (`?format=`)
ZIP = "zip"  # an answer that is a set of files, as a zip archive (an endpoint says it has one)


@dataclass(frozen=True)
class Archive:
    """An answer that is a set of files: {path: text}, and the name of its zip archive (without
    `.zip`; its one top folder too)."""

    name: str
    files: dict[str, str]


@dataclass(frozen=True)
class Answer:
    """A use-case's answer, each form built on demand (a request asks for one): the view (the
    CLI's table and Markdown), the JSON document and, for an endpoint offering ZIP, its files."""

    view: Callable[[], View]
    document: Callable[[], Document]
    archive: Callable[[], Archive] | None = None


@dataclass(frozen=True)
class Endpoint:
    name: str
    body: type[Strict]
    handler: Callable[[Strict, Catalog], Answer]
    summary: str
    formats: tuple[str, ...] = FORMATS


ENDPOINTS: dict[str, Endpoint] = {}


def endpoint(
    name: str, body: type[B], formats: tuple[str, ...] = FORMATS
) -> Callable[[Handler[B]], Handler[B]]:
    """Register `handler` as POST /api/v1/`name` taking `body`, answering in `formats`."""

    def register(handler: Handler[B]) -> Handler[B]:
        doc = (handler.__doc__ or name).strip().splitlines()[0]
        ENDPOINTS[name] = Endpoint(name, body, handler, doc, formats)  # type: ignore[arg-type]
        return handler

    return register


@cache
def case_study() -> tuple[Path, Scenario]:
    """The default scenario, read once (the shipped file does not change under a server), and
    its name in answers: the repository's, not the server's path (server/naming.py)."""
    return CASE_STUDY_NAME, load_scenario(default_scenario_file())


def problem_of(body: bodies.ScenarioBody, catalog: Catalog) -> Problem:
    """The body's scenario (default: the case study, read as the CLI reads it) as a Problem."""
    if body.scenario is None:
        path, scenario = case_study()
        return build_problem(scenario, path, catalog, body.bandwidth_gbps)
    if isinstance(body.scenario.workload.input_tokens, ObservedLengthsFile | MetricsLengths):
        raise ConfigError(
            "request: workload.input_tokens: an observed or metrics distribution names a file, "
            "and the server reads no file a request names; send a histogram instead",
            parameter="scenario",
        )
    return build_problem(body.scenario, REQUEST_SOURCE, catalog, body.bandwidth_gbps)


def plan_report(body: bodies.PlanBody, catalog: Catalog) -> "PlanReport":
    """The PlanReport of `optimize` for this body."""
    from prfaas_plan.use_cases import calls

    return calls.optimize(problem_of(body, catalog), body, catalog)


@endpoint("optimize", bodies.PlanBody)
@endpoint("plan", bodies.PlanBody)  # its first name, kept for the clients that use it
def plan_endpoint(body: bodies.PlanBody, catalog: Catalog) -> Answer:
    """`optimize`: the threshold, the PD split (or the PrfaaS size) against both baselines."""
    from prfaas_plan.render.plan import plan_to_json, plan_view

    report = plan_report(body, catalog)
    return Answer(lambda: plan_view(report), lambda: plan_to_json(report))


@endpoint("evaluate", bodies.EvaluateBody)
def evaluate_endpoint(body: bodies.EvaluateBody, catalog: Catalog) -> Answer:
    """`evaluate`: one given configuration (t, N_p, the rest of the PD cluster decodes)."""
    from prfaas_plan.render.plan import evaluation_to_json, evaluation_view
    from prfaas_plan.use_cases import calls

    report = calls.evaluate(problem_of(body, catalog), body, catalog)
    return Answer(lambda: evaluation_view(report), lambda: evaluation_to_json(report))


@endpoint("kv", bodies.KvBody)
def kv_endpoint(body: bodies.KvBody, catalog: Catalog) -> Answer:
    """`kv`: KV footprint of catalog models from their architecture, and Φ_kv."""
    from prfaas_plan.render.catalog import kv_json, kv_view
    from prfaas_plan.use_cases.kv import kv_report

    report = kv_report(
        catalog, body.models, body.lengths_tokens, kv_dtype=body.kv_dtype,
        state_dtype=body.state_dtype, gpu=body.gpu, gpus_per_instance=body.gpus_per_instance,
    )  # fmt: skip
    return Answer(lambda: kv_view(report), lambda: kv_json(report))


@endpoint("egress", bodies.EgressBody)
def egress_endpoint(body: bodies.EgressBody, catalog: Catalog) -> Answer:
    """`egress`: the bandwidth wall, the KV egress a saturated prefill cluster needs (eq. 2)."""
    from prfaas_plan.render.catalog import egress_json, egress_view
    from prfaas_plan.use_cases.egress import egress_report

    report = egress_report(
        catalog, models=body.models, prfaas_gpus=body.prfaas_gpus,
        gpus_per_instance=body.gpus_per_instance, gpu=body.gpu, mean_tokens=body.mean_tokens,
        link_gbps=body.link_gbps,
    )  # fmt: skip
    return Answer(lambda: egress_view(report), lambda: egress_json(report))


@endpoint("simulate", bodies.SimulateBody)
def simulate_endpoint(body: bodies.SimulateBody, catalog: Catalog) -> Answer:
    """`simulate` (bounded): the planned deployment under Poisson, gamma or sinusoidal load."""
    from prfaas_plan.render.simulation import simulation_json, simulation_view
    from prfaas_plan.use_cases import calls

    runs = max(len(body.load) if body.load is not None else 1, 1)
    if body.requests * runs > bodies.MAX_SIMULATED_REQUESTS:
        raise ConfigError(
            f"requests x loads must be <= {bodies.MAX_SIMULATED_REQUESTS:,} on this server, "
            f"got {body.requests:,} x {runs} = {body.requests * runs:,}; run the CLI for more",
            parameter="arrivals.requests",
        )
    report = calls.simulate(problem_of(body, catalog), body, catalog)
    return Answer(lambda: simulation_view(report), lambda: simulation_json(report))


@endpoint("sensitivity", bodies.SensitivityBody)
def sensitivity_endpoint(body: bodies.SensitivityBody, catalog: Catalog) -> Answer:
    """`sensitivity`: what binds, what the next unit of each resource buys, the routing bound."""
    from prfaas_plan.render.sensitivity import sensitivity_to_json, sensitivity_view
    from prfaas_plan.use_cases import calls

    report = calls.sensitivity(problem_of(body, catalog), body, catalog)
    return Answer(lambda: sensitivity_view(report), lambda: sensitivity_to_json(report))


def procure_problem(body: bodies.ProcureBody | bodies.ParetoBody, catalog: Catalog) -> Problem:
    """The Problem of a /procure or /procure/pareto body, its candidate space within the
    server's MAX_PROCURE_INSTANCES (the body's own max_instances_per_site is, by its schema)."""
    problem = problem_of(body, catalog)
    spec = problem.scenario.procurement
    if spec is not None:
        limits = [("procurement.max_pd_instances", spec.max_pd_instances)]
        if body.max_instances_per_site is None:
            limits += [(f"procurement.sites[{s.name}].max_instances", s.max_instances)
                       for s in spec.sites or ()]  # fmt: skip
        for field, value in limits:
            if value > bodies.MAX_PROCURE_INSTANCES:
                raise ConfigError(
                    f"request: scenario.{field} must be <= {bodies.MAX_PROCURE_INSTANCES} on "
                    f"this server, got {value:,}; run the CLI for more",
                    parameter=field,
                )
    return problem


@endpoint("procure", bodies.ProcureBody)
def procure_endpoint(body: bodies.ProcureBody, catalog: Catalog) -> Answer:
    """`procure`: the cheapest deployment reaching target_rps, or the most Λ within a budget."""
    from prfaas_plan.render.procure import procure_to_json, procure_view
    from prfaas_plan.use_cases import calls

    report = calls.procure(procure_problem(body, catalog), body, catalog)
    return Answer(lambda: procure_view(report), lambda: procure_to_json(report))


@endpoint("procure/pareto", bodies.ParetoBody)
def procure_pareto_endpoint(body: bodies.ParetoBody, catalog: Catalog) -> Answer:
    """`procure --pareto`: cost against Λ_max and, reaching target_rps, against P90 TTFT."""
    from prfaas_plan.render.procure import pareto_to_json, pareto_view
    from prfaas_plan.use_cases import calls

    report = calls.pareto(procure_problem(body, catalog), body, catalog)
    return Answer(lambda: pareto_view(report), lambda: pareto_to_json(report))


@endpoint("explain", bodies.ExplainBody)
def explain_endpoint(body: bodies.ExplainBody, catalog: Catalog) -> Answer:
    """`explain`: the model's equations with the scenario's numbers substituted."""
    from prfaas_plan.render.explain import explain_to_json, explain_view
    from prfaas_plan.use_cases import calls

    report = calls.explain(problem_of(body, catalog), body, catalog)
    return Answer(lambda: explain_view(report), lambda: explain_to_json(report))


@endpoint("export", bodies.ExportBody, formats=(*FORMATS, ZIP))
def export_endpoint(body: bodies.ExportBody, catalog: Catalog) -> Answer:
    """`export`: the plan as a stack's manifests (llm-d, Dynamo, Kubernetes) and its note."""

    problem = problem_of(body, catalog)
    result = build_export(problem, plan_from_scenario(problem, body.mode), body)
    texts = file_texts(result.files)

    def view() -> View:
        rows = [
            (file.path, [", ".join(str(d.body.get("kind")) for d in file.documents) or "note",
                         f"{len(texts[file.path].encode('utf-8')):,}"])
            for file in result.files
        ]  # fmt: skip
        title = f"prfaas-plan export · {result.target.value} · {problem.scenario.name}"
        return View(title, ["documents", "bytes"], rows, [result.summary()])

    archive = Archive(f"{result.name}-{result.target.value}", texts)
    return Answer(view, lambda: texts, lambda: archive)


def whatif(body: bodies.PlanBody, catalog: Catalog) -> Document:
    """The what-if page's call: /plan's JSON, its table (as JSON) and Markdown, and the
    threshold-balance curve."""
    from prfaas_plan.render.balance import balance_json
    from prfaas_plan.render.plan import plan_to_json, plan_view

    report = plan_report(body, catalog)
    view = plan_view(report)
    table = {"title": view.title, "columns": view.columns,
             "rows": [[label, cells] for label, cells in view.rows], "notes": view.notes}  # fmt: skip
    return {"plan": plan_to_json(report), "view": table, "markdown": render_markdown(view),
            "balance": balance_json(report)}  # fmt: skip
