"""The web dashboard: a FastAPI app over the Python API (the planner, the catalog, the run store), server-rendered
with Jinja2 templates (autoescaped), Plotly charts drawn in the browser from the plan's own numbers, and a little
progressive JavaScript (inline validation while typing; the pages work without it except for the charts).

Routes: ``GET /`` scenario editor · ``POST /plan`` (form) a plan page · ``GET|POST /compare`` two plans side by
side · ``GET /runs`` stored benchmark runs and calibration profiles · ``GET /catalog`` GPUs, prices and models with
sources, searchable · ``GET /healthz`` · ``POST /api/plan`` (YAML or JSON body → what ``scaleright plan --json``
prints; a bad scenario → 422 with the CLI's one-line message) · ``POST /api/validate`` · ``GET /static/NAME``.

Safety: it binds to loopback unless told otherwise and then accepts only loopback ``Host`` headers (no DNS
rebinding); request bodies are capped (``MAX_BODY_BYTES``); every user string is escaped by the templates; static
files come from a fixed list (no path is built from a request); a scenario's ``model`` must be a catalog name (the
dashboard reads no file a request names); forms carry a per-process CSRF token checked against a SameSite=Strict
cookie and the ``Origin``; the JSON API refuses the content types a cross-site form can send (text/plain,
urlencoded, multipart) and any foreign ``Origin``. Responses carry a Content-Security-Policy with no inline script.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from collections import OrderedDict
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint

import scaleright
from scaleright import fmt
from scaleright.api import json_safe, visible
from scaleright.catalog import Catalog
from scaleright.dashboard.figures import plan_figures
from scaleright.errors import ScalerightError
from scaleright.estimate.calibration import Profile, load_profile
from scaleright.estimate.layout import layout_text

__all__ = ["create_app", "MAX_BODY_BYTES", "LOOPBACK_HOSTS"]

MAX_BODY_BYTES = 64_000  # a real scenario is under 2 kB; two of them in a compare form well under this
MAX_QUERY_CHARS = 100
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
PLAN_CACHE_SIZE = 64  # plans kept by scenario text (a plan is deterministic for a scenario, catalog and profile)
_JSON_TYPES = ("application/json",)
_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")  # fmt: skip
EXAMPLES = ("chat-service-8b", "lora-7b-one-gpu", "llama70b-full-finetune")


def _plotly_js() -> Path | None:
    """plotly.js as the plotly package ships it (offline: no CDN); None when plotly is not installed."""
    try:
        import plotly
    except ImportError:
        return None
    p = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    return p if p.is_file() else None


def _example(name: str) -> str:
    return resources.files("scaleright.dashboard").joinpath("examples", f"{name}.yaml").read_text(encoding="utf-8")


class _Limits(BaseHTTPMiddleware):
    """Host check (loopback binds), body cap, security headers."""

    def __init__(self, app: Any, *, loopback_only: bool) -> None:
        super().__init__(app)
        self.loopback_only = loopback_only

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if self.loopback_only and _host_name(request.headers.get("host") or "") not in LOOPBACK_HOSTS:
            return JSONResponse({"error": "Host header is not a loopback name; this dashboard serves 127.0.0.1"},
                                status_code=421)  # fmt: skip
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return JSONResponse({"error": f"request body over {MAX_BODY_BYTES:,} bytes"}, status_code=413)
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = _CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers.setdefault("Cache-Control", "no-store")
        return response


class _PlanCache:
    """Plans by scenario text, least recently used dropped first; thread-safe (endpoints run in a thread pool)."""

    def __init__(self, size: int) -> None:
        self.size, self.items, self.lock = size, OrderedDict[str, dict](), threading.Lock()

    def get(self, key: str) -> dict | None:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        return None

    def put(self, key: str, value: dict) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)


def create_app(*, catalog: Catalog | None = None, db: Path | None = None, profile: Profile | None = None,
               loopback_only: bool = True) -> FastAPI:  # fmt: skip
    """The dashboard app. ``catalog``: the catalog plans use (default: the built-in one, with ``$SCALERIGHT_CATALOG``
    as ``Catalog.load`` reads it); ``db``: the run store to show (its default location if None); ``profile``: the
    calibration profile plans use (default: the built-in calibration), recorded in every plan as ``plan --json``
    records it; ``loopback_only``: accept only loopback Host headers."""
    cat = catalog if catalog is not None else Catalog.load()
    prof = profile if profile is not None else load_profile(None)
    cal = prof.calibration
    app = FastAPI(title="scaleright dashboard", version=scaleright.__version__, docs_url=None, redoc_url=None,
                  openapi_url=None)  # fmt: skip
    app.add_middleware(_Limits, loopback_only=loopback_only)
    env = Environment(loader=PackageLoader("scaleright.dashboard", "templates"), autoescape=select_autoescape(
        default=True, default_for_string=True), trim_blocks=True, lstrip_blocks=True)  # fmt: skip
    env.globals.update(fmt=fmt, version=scaleright.__version__)
    secret = secrets.token_bytes(32)
    cache = _PlanCache(PLAN_CACHE_SIZE)
    static = {"app.js": ("static", "app.js", "text/javascript"), "app.css": ("static", "app.css", "text/css")}

    def csrf_token() -> str:
        return hmac.new(secret, b"scaleright-form", hashlib.sha256).hexdigest()

    def page(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        resp = HTMLResponse(env.get_template(name).render(csrf=csrf_token(), **ctx), status_code=status)
        resp.set_cookie("sr_csrf", csrf_token(), httponly=True, samesite="strict")
        return resp

    def same_origin(request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None:
            return True  # not a browser's cross-site request (browsers send Origin on cross-site POSTs)
        host = request.headers.get("host", "")
        return origin in (f"http://{host}", f"https://{host}")

    async def form_fields(request: Request) -> dict[str, str]:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            raise _Refused(413, f"request body over {MAX_BODY_BYTES:,} bytes")
        form = await request.form()
        token = str(form.get("csrf", ""))
        if not (same_origin(request) and hmac.compare_digest(token, csrf_token())
                and hmac.compare_digest(request.cookies.get("sr_csrf", ""), csrf_token())):  # fmt: skip
            raise _Refused(403, "the form's CSRF token or origin does not match this dashboard; reload the page")
        return {k: str(v) for k, v in form.items()}

    def parse(text: str, *, json_body: bool = False) -> Any:
        """The validated scenario of a request's text; ``_Refused(422, the CLI's one line)`` when it is not one."""
        from scaleright.plan.scenario import parse_scenario
        from scaleright.userdata import load_json, load_yaml

        try:
            scn = parse_scenario(load_json(text, "scenario") if json_body else load_yaml(text, "scenario"))
        except ScalerightError as exc:
            raise _Refused(422, visible(str(exc))) from None
        # Every field that may name a file on the server: the dashboard reads none (no path traversal by scenario).
        inf = getattr(scn, "inference", None)
        models = [("model", scn.model)] + [(f"inference.tiers[{i}].model", t.model)
                                           for i, t in enumerate(getattr(inf, "tiers", None) or [])]  # fmt: skip
        for field, name in models:
            try:
                cat.model_entry(name)
            except ScalerightError:
                raise _Refused(422, f"scenario: {field}={visible(name)!r} is not a catalog model; the dashboard "
                               "reads no files, so choose a name from the catalog page (or run `scaleright plan` "
                               "locally for a config.json)") from None  # fmt: skip
        if inf is not None and getattr(inf, "trace", None):
            raise _Refused(422, "scenario: inference.trace names a file; the dashboard reads no files (use arrival: "
                           "constant or diurnal here, or run `scaleright plan` locally with the trace)")
        return scn

    def run_plan(text: str, *, json_body: bool = False) -> dict:
        """The plan of a scenario text, as ``plan --json`` prints it; ``_Refused(422, one line)`` on bad input."""
        key = ("j" if json_body else "y") + text
        hit = cache.get(key)
        if hit is not None:
            return hit
        from scaleright.plan.planner import plan
        from scaleright.results.plan import PlanResult

        scn = parse(text, json_body=json_body)
        try:  # the one home of a plan's JSON: the validated result, cleaned as emit_json prints it
            result = json_safe(PlanResult.of(plan(scn, catalog=cat, cal=cal), calibration=prof.record()).to_dict())
        except ScalerightError as exc:
            raise _Refused(422, visible(str(exc))) from None
        cache.put(key, result)
        return result

    @app.exception_handler(_Refused)
    async def _refused(request: Request, exc: _Refused) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.message}, status_code=exc.status)
        return page("error.html", exc.status, message=exc.message)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:  # never a traceback in a page
        return JSONResponse({"error": f"internal error ({type(exc).__name__})"}, status_code=500)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok", "version": scaleright.__version__}

    @app.get("/", response_class=HTMLResponse)
    def index(example: str = "chat-service-8b") -> HTMLResponse:
        if example not in EXAMPLES:
            raise _Refused(404, f"example {example[:MAX_QUERY_CHARS]!r} not found; examples: {', '.join(EXAMPLES)}")
        return page("index.html", examples=EXAMPLES, example=example, scenario=_example(example), error=None)

    @app.post("/plan", response_class=HTMLResponse)
    async def plan_page(request: Request) -> HTMLResponse:
        fields = await form_fields(request)
        text = fields.get("scenario", "")
        try:
            res = run_plan(text)
        except _Refused as exc:
            if exc.status != 422:
                raise
            return page("index.html", 422, examples=EXAMPLES, example=None, scenario=text, error=exc.message)
        return page("plan.html", res=res, view=_view(res), figures=_script_json(plan_figures(res)))

    @app.get("/compare", response_class=HTMLResponse)
    def compare_form() -> HTMLResponse:
        return page("compare.html", left=_example("lora-7b-one-gpu"), right=_example("llama70b-full-finetune"),
                    results=None, errors=[None, None])  # fmt: skip

    @app.post("/compare", response_class=HTMLResponse)
    async def compare(request: Request) -> HTMLResponse:
        fields = await form_fields(request)
        texts = [fields.get("left", ""), fields.get("right", "")]
        results: list[dict | None] = []
        errors: list[str | None] = []
        for t in texts:
            try:
                results.append(run_plan(t))
                errors.append(None)
            except _Refused as exc:
                if exc.status != 422:
                    raise
                results.append(None)
                errors.append(exc.message)
        views = [_view(r) if r else None for r in results]
        figs = [_script_json(plan_figures(r)[:1] if r else []) for r in results]
        return page("compare.html", left=texts[0], right=texts[1], results=results, views=views, errors=errors,
                    figures=figs, status=200 if all(e is None for e in errors) else 422)  # fmt: skip

    @app.get("/runs", response_class=HTMLResponse)
    def runs() -> HTMLResponse:
        from scaleright.bench.db import RunStore
        from scaleright.estimate.calibration import calibration_dir

        store, error, rows = RunStore(db), None, []
        try:
            damaged: list[str] = []
            rows = store.list(damaged=damaged)
        except ScalerightError as exc:
            error = visible(str(exc))
        profiles = []
        d = calibration_dir()
        if d.is_dir():
            for p in sorted(d.glob("*.json"))[:200]:
                try:
                    profiles.append({"name": p.stem, "values": json.loads(p.read_text(encoding="utf-8")[:200_000])})
                except (OSError, ValueError):
                    profiles.append({"name": p.stem, "values": None})
        return page("runs.html", runs=rows, error=error, profiles=profiles, db=str(store.path))

    @app.get("/catalog", response_class=HTMLResponse)
    def catalog_page(q: str = "", kind: str = "gpus") -> HTMLResponse:
        if len(q) > MAX_QUERY_CHARS:
            raise _Refused(413, f"q: at most {MAX_QUERY_CHARS} characters")
        if kind not in ("gpus", "prices", "models"):
            raise _Refused(404, "kind must be gpus, prices or models")
        needle = q.lower()
        if kind == "gpus":
            rows = [g.model_dump() for g in cat.gpus.values()]
        elif kind == "prices":
            rows = [r.model_dump() for r in cat.prices]
        else:
            rows = [{"name": name, "aliases": ", ".join(getattr(e, "aliases", []) or []),
                     "source": getattr(e, "source", "")} for name, e in cat.models.items()]  # fmt: skip
        rows = [r for r in rows if not needle or needle in json.dumps(r, default=str).lower()]
        return page("catalog.html", kind=kind, q=q, rows=rows)

    @app.post("/api/plan")
    async def api_plan(request: Request) -> JSONResponse:
        text, is_json = await _api_body(request)
        return JSONResponse(run_plan(text, json_body=is_json))

    @app.post("/api/validate")
    async def api_validate(request: Request) -> JSONResponse:
        text, is_json = await _api_body(request)
        parse(text, json_body=is_json)
        return JSONResponse({"ok": True})

    async def _api_body(request: Request) -> tuple[str, bool]:
        origin = request.headers.get("origin")
        if origin is not None and not same_origin(request):
            raise _Refused(403, "cross-origin requests are refused")
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype not in (*_JSON_TYPES, *_YAML_TYPES):
            raise _Refused(415, "send the scenario as application/json or application/yaml")
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            raise _Refused(413, f"request body over {MAX_BODY_BYTES:,} bytes")
        try:
            return body.decode("utf-8"), ctype in _JSON_TYPES
        except UnicodeDecodeError:
            raise _Refused(422, "scenario: not UTF-8 text") from None

    @app.get("/static/{name}")
    def static_file(name: str) -> Response:
        if name == "plotly.min.js":
            p = _plotly_js()
            if p is None:
                return Response("/* plotly is not installed: pip install 'scaleright[dashboard]' */",
                                media_type="text/javascript")  # fmt: skip
            return FileResponse(p, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})
        if name not in static:
            raise _Refused(404, "not found")
        folder, file, media = static[name]
        text = resources.files("scaleright.dashboard").joinpath(folder, file).read_text(encoding="utf-8")
        return Response(text, media_type=media, headers={"Cache-Control": "max-age=3600"})

    return app


def _host_name(host: str) -> str:
    """The name part of a Host header: "127.0.0.1:8765" -> "127.0.0.1", "[::1]:8765" -> "[::1]"."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class _Refused(Exception):
    """A request refused with an HTTP status and one line for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _script_json(obj: Any) -> Markup:
    """JSON for a ``<script type="application/json">`` island: ``<``, ``>`` and ``&`` as \\u escapes, so no string in
    it can close the element (``</script>``) or open markup; the browser's JSON.parse reads them back."""
    text = json.dumps(obj, allow_nan=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)


def _view(res: dict) -> dict:
    """What the templates print of a plan, formatted by ``scaleright.fmt`` (the same figures as the terminal)."""
    s = res["scenario"]
    training = s.get("task") != "inference"

    def row(o: dict) -> dict[str, Any]:
        base = {"GPU": o.get("gpu"), "GPUs": o.get("gpus"), "layout": layout_text(o.get("layout") or {})}
        if training:
            return base | {"time h": fmt.number(o.get("time_h")), "cost": fmt.usd(o.get("cost_usd")),
                           "$/1M tok": fmt.usd(o.get("cost_per_1m_tokens_usd")), "MFU": fmt.percent(o.get("mfu")),
                           "mem GB/GPU": fmt.number(o.get("memory_gb_per_gpu")),
                           "$/GPU-h": fmt.usd(o.get("price_usd_per_gpu_hour"))}  # fmt: skip
        return base | {"$/month": fmt.usd(o.get("cost_usd")), "$/1M out tok": fmt.usd(o.get("cost_per_1m_tokens_usd")),
                       "TTFT ms": fmt.ms(o.get("ttft_s")), "TPOT ms": fmt.ms(o.get("tpot_s")),
                       "util": fmt.percent(o.get("utilisation")), "$/GPU-h": fmt.usd(o.get("price_usd_per_gpu_hour"))}

    rec = res.get("recommendation")
    return {"training": training, "rec": row(rec) if rec else None,
            "options": [row(o) for o in res.get("options") or []], "pareto": [row(o) for o in res.get("pareto") or []],
            "infeasible": res.get("infeasible") or {}, "skipped": (res.get("search") or {}).get("skipped") or []}
