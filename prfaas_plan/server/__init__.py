"""The HTTP API and the what-if page (`prfaas-plan serve`): the same use-cases (use_cases/) and
views (render/) as the CLI, behind a versioned JSON API, with bounds on what one request may cost.
FastAPI and uvicorn are imported only here, and only when the server starts."""
