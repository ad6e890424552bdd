"""The approval console: server-rendered pages under /ui over the same service and views."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from interlock.api.auth import AuthConfig
from interlock.api.ui.data_policies import router as policing
from interlock.api.ui.decide import router as deciding
from interlock.api.ui.delegations import router as delegating
from interlock.api.ui.links import router as linking
from interlock.api.ui.render import HERE, on_bad_query, on_error, on_http_error
from interlock.api.ui.reviews import router as reviewing
from interlock.api.ui.router import router
from interlock.api.ui.session import MemorySessions, Sessions, SessionStore
from interlock.audit.signing import Signer
from interlock.domain import Interlock
from interlock.domain.errors import InterlockError
from interlock.projections.interface import ReadModels


def console(service: Interlock, read_models: ReadModels, auth: AuthConfig,
            signer: Signer | None = None, sessions: SessionStore | None = None) -> FastAPI:
    """The console as an app of its own (mounted at /ui): its errors are pages, not JSON.
    `signer`: the checkpoint key evidence packs are signed with (none: refused).
    `sessions`: where sign-ins are kept (the store's table; none: in this process)."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service, app.state.read_models = service, read_models
    app.state.auth, app.state.signer = auth, signer
    app.state.sessions = Sessions(auth, sessions or MemorySessions())
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.include_router(router)
    app.include_router(deciding)
    app.include_router(reviewing)
    app.include_router(linking)
    app.include_router(delegating)
    app.include_router(policing)
    app.add_exception_handler(InterlockError, on_error)
    app.add_exception_handler(RequestValidationError, on_bad_query)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    return app
