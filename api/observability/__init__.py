"""What an operator sees of the API: OpenAPI, request ids, logs, metrics, traces."""
