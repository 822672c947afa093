"""The client against the /openapi.json a Doppel serves: every route,
method and field it uses must be there, and its errors the closed set."""

import json
import urllib.request

import pytest

import doppel
from doppel.client import OPERATIONS, VERIFY_FAILURE_FIELDS


@pytest.fixture
def openapi(shop):
    with urllib.request.urlopen(shop.admin_url + "/openapi.json") as r:
        return json.load(r)


def resolve(doc, schema):
    while "$ref" in schema:
        node = doc
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def properties(doc, schema):
    """The property names a schema allows, over its oneOf alternatives."""
    schema = resolve(doc, schema)
    names = set(schema.get("properties", {}))
    for alt in schema.get("oneOf", []) + schema.get("anyOf", []):
        names |= properties(doc, alt)
    return names


def success_schema(doc, operation):
    for status in ("200", "201"):
        answer = operation["responses"].get(status)
        if answer and "content" in answer:
            return answer["content"]["application/json"]["schema"]
    return {}


@pytest.mark.parametrize("op", OPERATIONS.values(), ids=lambda op: op.id)
def test_each_operation_is_served_as_the_client_calls_it(openapi, op):
    path = openapi["paths"].get(op.path)
    assert path is not None, "%s: %s is not in /openapi.json" % (op.id, op.path)
    operation = path.get(op.method.lower())
    assert operation is not None, "%s: %s %s is not in /openapi.json" % (op.id, op.method, op.path)
    assert operation["operationId"] == op.id

    params = {p["name"] for p in (resolve(openapi, p) for p in operation.get("parameters", []) + path.get("parameters", []))
              if p["in"] == "query"}
    assert set(op.query) <= params, "%s: query %s not in %s" % (op.id, set(op.query) - params, params)
    if op.body:
        body = properties(openapi, operation["requestBody"]["content"]["application/json"]["schema"])
        assert set(op.body) <= body, "%s: body %s not in %s" % (op.id, set(op.body) - body, body)
    if op.answer:
        answer = properties(openapi, success_schema(openapi, operation))
        assert set(op.answer) <= answer, "%s: answer %s not in %s" % (op.id, set(op.answer) - answer, answer)


def test_a_failed_verification_carries_what_the_client_reads(openapi):
    op = openapi["paths"]["/api/v1/requests/verify"]["post"]
    failure = properties(openapi, op["responses"]["409"]["content"]["application/json"]["schema"])
    assert set(VERIFY_FAILURE_FIELDS) <= failure


def test_there_is_one_error_class_per_code(openapi):
    codes = set(openapi["components"]["schemas"]["ErrorBody"]["properties"]["code"]["enum"])
    assert set(doppel.BY_CODE) == codes
    for code, cls in doppel.BY_CODE.items():
        assert issubclass(cls, doppel.DoppelError) and cls.code == code
        assert getattr(doppel, cls.__name__) is cls


def test_the_checked_in_document_is_the_one_served(openapi):
    import os
    checked_in = os.path.join(os.path.dirname(__file__), "..", "..", "..", "internal", "admin", "testdata",
                              "openapi.json")
    if not os.path.exists(checked_in):
        pytest.skip("not in Doppel's repository")
    with open(checked_in) as f:
        assert set(json.load(f)["paths"]) == set(openapi["paths"])


def test_a_proxy_document_has_the_fields_the_client_fills(openapi):
    # update_proxy reads "name"; create_proxy and update_proxy default "type".
    assert {"name", "type"} <= properties(openapi, {"$ref": "#/components/schemas/ProxyConfig"})
