"""A server's JSON schema as a type a `Tool` validates with and shows to the model as is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import jsonschema  # type: ignore[import-untyped]  # a dependency of the mcp SDK, untyped
from pydantic import AfterValidator, WithJsonSchema

from interlock.mcp.errors import McpConfigurationError


def json_schema_type(schema: Mapping[str, Any], what: str) -> Any:
    """A pydantic-validatable type whose values must satisfy `schema` (checked by jsonschema)."""
    checker = jsonschema.validators.validator_for(schema)
    try:
        checker.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise McpConfigurationError(f"{what} is not a valid JSON schema: {exc.message}") from None
    validator = checker(schema, format_checker=checker.FORMAT_CHECKER)

    def check(value: Any) -> Any:
        problems = [f"{_where(e)}: {e.message}" for e in validator.iter_errors(value)]
        if problems:
            raise ValueError("; ".join(sorted(problems)))
        return value

    return Annotated[Any, AfterValidator(check), WithJsonSchema(dict(schema))]


def _where(error: Any) -> str:
    return "/".join(str(p) for p in error.absolute_path) or "(the input)"
