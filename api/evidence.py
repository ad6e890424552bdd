"""A review's evidence pack over HTTP: the archive `interlock audit evidence` writes, by the
same code (interlock/audit/evidence.py), signed with the server's checkpoint key."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from uuid import UUID

from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from interlock.api.errors import NoSigningKeyError
from interlock.audit import evidence
from interlock.audit.signing import Signer
from interlock.domain import Interlock
from interlock.domain.review.service import Reviews

MEDIA = "application/zip"


def evidence_download(service: Interlock, signer: Signer | None, review_id: UUID,
                      tenant: str) -> FileResponse:
    """The signed pack of the tenant's review as a download (a temporary file, removed once
    sent); another tenant's review is not found, an open one is refused, nothing written."""
    Reviews(service).get(review_id, tenant=tenant)
    if signer is None:
        raise NoSigningKeyError()
    handle, name = tempfile.mkstemp(prefix="interlock-evidence-", suffix=".zip")
    os.close(handle)
    path = Path(name)
    try:
        evidence.write(service, review_id, signer, path)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return FileResponse(path, media_type=MEDIA, filename=f"evidence-{review_id}.zip",
                        background=BackgroundTask(path.unlink, missing_ok=True))
