// Typed errors: every error answer of the API is `{"error": {"code", "message", "details"}}`;
// `code` is one of the codes openapi.json lists, the class says the category (its status).
import type { components } from "./schema.js";

export type ErrorCode = components["schemas"]["ErrorDetail"]["code"];

export class InterlockAPIError extends Error {
  constructor(readonly status: number, readonly code: ErrorCode | "error", message: string,
              readonly details: Record<string, unknown> = {}) {
    super(`${status} ${code}: ${message}`);
    this.name = new.target.name;
  }
}

/** 401: no or an unknown API key. */
export class UnauthenticatedError extends InterlockAPIError {}
/** 403: the principal may not do this (a role, four-eyes, a policy's routing). */
export class ForbiddenError extends InterlockAPIError {}
/** 404: no such chat (or another tenant's), route or subscription. */
export class NotFoundError extends InterlockAPIError {}
/** 409: well-formed, but the chat moved on (decided already, stale input, a race). */
export class ConflictError extends InterlockAPIError {}
/** 413 and 422: the request itself is wrong; `details` names the field. */
export class InvalidRequestError extends InterlockAPIError {}
/** 502: the model failed; 503: the store or the views are not available now. */
export class UnavailableError extends InterlockAPIError {}

const BY_STATUS: Record<number, typeof InterlockAPIError> = {
  401: UnauthenticatedError, 403: ForbiddenError, 404: NotFoundError, 409: ConflictError,
  413: InvalidRequestError, 422: InvalidRequestError, 502: UnavailableError,
  503: UnavailableError,
};

function isBody(body: unknown): body is components["schemas"]["ErrorBody"] {
  return typeof body === "object" && body !== null && "error" in body;
}

export function errorFrom(status: number, body: unknown): InterlockAPIError {
  const Kind = BY_STATUS[status] ?? InterlockAPIError;
  if (!isBody(body)) return new Kind(status, "error", JSON.stringify(body ?? null));
  const { code, message, details } = body.error;
  return new Kind(status, code as ErrorCode, message, details);
}
