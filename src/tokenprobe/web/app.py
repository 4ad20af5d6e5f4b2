"""The FastAPI application of `tokenprobe serve` (U4).

    GET  /                  the calculator page (vanilla JS; plotly.js served from the package)
    GET  /static/plotly.js  plotly.min.js from the `plotly` Python package (no CDN)
    GET  /api/catalog       models, GPUs, dtypes and the input bounds
    POST /api/estimate      an EstimateRequest -> the estimate dict and its figures
    POST /api/whatif        a WorkloadRequest -> the same workload on every catalog GPU
    GET  /api/runs          run folders and sweeps under the runs folder (what ran, key numbers)
    GET  /api/runs/{name}   one run's summary.json (a sweep: each point's; a point: sweep/point)
    GET  /runs/{name}       one run's HTML report (a sweep: its curves and knee)

Every error is JSON `{"detail": "..."}`: 400 for a bad value (ConfigError: unknown model or GPU,
a combination the model rejects, a run whose files cannot be read, a body that is not JSON
Python can hold), 404 for an unknown run, 413 for a body over 1 MB (counted as it arrives,
chunked or not: body_limit.py), 422 for a body that does not match the schema (wrong type, out of
bounds, unknown key, NaN or infinity, broken JSON).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException

from tokenprobe.calibrate import shipped_profiles
from tokenprobe.errors import ConfigError, TokenprobeError
from tokenprobe.hardware import gpu_names
from tokenprobe.model import catalog_names
from tokenprobe.report import (
    compare_row,
    comparison_figure,
    describe_estimate,
    estimate_figures,
    plotly_js,
)
from tokenprobe.web.body_limit import BodyLimit
from tokenprobe.web.page import INDEX_HTML
from tokenprobe.web.runs import (
    RunNotFoundError,
    list_runs,
    load_summary,
    run_dir,
    run_report_html,
    sweep_dir,
    sweep_report_html,
    sweep_summaries,
)
from tokenprobe.web.schemas import (
    DTYPE_NAMES,
    LIMITS,
    EstimateRequest,
    WorkloadRequest,
    catalog_gpu,
    request_model,
    run_estimate,
)

MAX_BODY_BYTES = 1_000_000


def _error(status: int, detail: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"detail": detail, **extra}, status_code=status)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        parts.append(f"{'.'.join(loc) or 'body'}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg")} for e in exc.errors()]
        return _error(422, _validation_message(exc), errors=errors)

    @app.exception_handler(ConfigError)
    async def bad_value(_: Request, exc: ConfigError) -> JSONResponse:
        return _error(400, str(exc), field=exc.field)

    @app.exception_handler(RunNotFoundError)
    async def no_run(_: Request, exc: RunNotFoundError) -> JSONResponse:
        return _error(404, f"no run named {exc.args[0]!r} in the runs folder")

    @app.exception_handler(TokenprobeError)
    async def failed(_: Request, exc: TokenprobeError) -> JSONResponse:
        return _error(500, str(exc))

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> Response:
        if exc.status_code in (204, 304):  # no body allowed
            return Response(status_code=exc.status_code, headers=exc.headers)
        detail = _unparsable_body(exc) or str(exc.detail)
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=exc.headers)


def _unparsable_body(exc: HTTPException) -> str | None:
    """The reason FastAPI's JSON parsing failed, when its 400 says only "There was an error
    parsing the body" (json.loads raises ValueError, not JSONDecodeError, for a number of more
    than 4,300 digits or bytes that are not UTF-8, and RecursionError for deep nesting)."""
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None:
        return None
    if isinstance(cause, RecursionError):
        return "body: JSON nested too deeply"
    if isinstance(cause, UnicodeDecodeError):
        return f"body: not UTF-8 (byte {cause.start})"
    if "integer string conversion" in str(cause):
        return "body: a number of more than 4,300 digits"
    return f"body: not JSON ({cause})"


def _catalog() -> dict[str, Any]:
    from tokenprobe.hardware import get_gpu

    gpus = []
    for name in gpu_names():
        g = get_gpu(name)
        gpus.append(
            {
                "name": name,
                "display_name": g.display_name,
                "hbm_bytes": g.hbm_bytes,
                "hbm_bytes_per_s": g.hbm_bytes_per_s,
                "peak_flop_per_s": dict(g.peak_flop_per_s),
                "tdp_w": g.tdp_w,
            }
        )
    return {
        "models": catalog_names(),
        "gpus": gpus,
        "dtypes": list(DTYPE_NAMES),
        "profiles": shipped_profiles(),
        "limits": {k: {"min": lo, "max": hi} for k, (lo, hi) in LIMITS.items()},
    }


def _whatif(req: WorkloadRequest) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    model = request_model(req)  # a bad model is the request's fault: 400 before any GPU
    for name in gpu_names():
        try:
            est = run_estimate(req, catalog_gpu(name), model).to_dict()
        except ConfigError as exc:
            if exc.field.split(".")[0] in ("model", "hf_config"):
                raise  # the same for every GPU: the request is bad, not this GPU
            rows.append({"label": name, "gpu": name, "fits": False, "reason": str(exc)})
            continue
        rows.append(compare_row(name, est))
    ok = [r for r in rows if "ttft_s" in r]
    ok.sort(key=lambda r: (not r["fits"], -float(r["output_tokens_per_s"])))
    failed = [r for r in rows if "ttft_s" not in r]
    title = "The same workload on every GPU of the catalog"
    return {"rows": ok + failed, "figure": comparison_figure(ok, title)}


def create_app(runs_dir: str | Path = "runs") -> FastAPI:
    """The app; `runs_dir` is the only folder it reads run data from."""
    runs_root = Path(runs_dir)
    app = FastAPI(title="tokenprobe", docs_url=None, redoc_url=None)
    _install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return INDEX_HTML

    @app.get("/favicon.ico")
    def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/static/plotly.js")
    def plotly() -> Response:
        return Response(
            plotly_js(),
            media_type="application/javascript",
            headers={"Cache-Control": "max-age=86400"},
        )

    @app.get("/api/catalog")
    def catalog() -> dict[str, Any]:
        return _catalog()

    @app.post("/api/estimate")
    def post_estimate(req: EstimateRequest) -> dict[str, Any]:
        est = run_estimate(req, catalog_gpu(req.gpu)).to_dict()
        return {
            "estimate": est,
            "description": describe_estimate(est),
            "figures": estimate_figures(est),
        }

    @app.post("/api/whatif")
    def post_whatif(req: WorkloadRequest) -> dict[str, Any]:
        return _whatif(req)

    @app.get("/api/runs")
    def runs() -> dict[str, Any]:
        return {"runs": list_runs(runs_root)}

    @app.get("/api/runs/{name:path}")
    def run_summary(name: str) -> dict[str, Any]:
        sweep = sweep_dir(runs_root, name)
        if sweep is not None:
            return {"name": sweep.name, "sweep": True, "points": sweep_summaries(runs_root, sweep)}
        path = run_dir(runs_root, name)
        return {"name": path.name, "summary": load_summary(runs_root, path)}

    @app.get("/runs/{name:path}", response_class=HTMLResponse)
    def run_report(name: str) -> str:
        sweep = sweep_dir(runs_root, name)
        if sweep is not None:
            return sweep_report_html(runs_root, sweep)
        return run_report_html(runs_root, run_dir(runs_root, name))

    return app


def serve(host: str = "127.0.0.1", port: int = 8080, runs_dir: str | Path = "runs") -> None:
    """Run the app with uvicorn until interrupted (binds loopback unless told otherwise)."""
    import uvicorn

    uvicorn.run(create_app(runs_dir), host=host, port=port, log_level="warning")
