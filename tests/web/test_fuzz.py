"""API fuzzing with schemathesis against our own OpenAPI schema, in-process (issue 9).

Every operation gets schema-valid and schema-invalid requests generated from
``/openapi.json``. Whatever comes in, the app must never answer 5xx, and every
answer must match the status codes, content types and response schemas the
schema documents; schema-invalid requests must be refused with a 4xx (413
included: a profile of 20,001 measurement rows is over the upload size limit
before it is over the schema's maxItems).

Left out: ``positive_data_acceptance`` (schema-valid means accepted). The schema
cannot say everything the params check: catalog ids (``gpu``, ``model``,
``profile``) are strings checked against catalogs that can grow at start-up
(``serve --profile``), and labs refuse some combinations (tp must divide the
heads, a draft must share the target's tokenizer); those are 422s by design.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import positive_data_acceptance
from schemathesis.config import SchemathesisConfig

from web.app import create_app

REFUSED = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]  # schemathesis' list, plus 413
config = SchemathesisConfig.from_dict({"checks": {"negative_data_rejection": {"expected-statuses": REFUSED}}})
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(), config=config)


@schema.parametrize()
# No shrinking: it can take minutes on multi-megabyte profile bodies; a failure still prints a curl command.
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
def test_api_never_fails_and_answers_match_the_schema(case):
    case.call_and_validate(excluded_checks=[positive_data_acceptance])
