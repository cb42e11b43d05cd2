"""Holds the request bodies we send to Gemini against Google's own types (google-genai).

Run by tests/it/wire_schema.rs as `python validate_genai.py <records.json>`, with the google-genai
of `.ci/run`'s environment (target/genai, a pinned version). Each record is
`{"name": …, "backend": "api" | "vertex", "model": …, "body": {…}}`, a `generateContent` body as
the binary sent it to the stand-in Gemini, or `{"name": …, "response": {…}}`, one chunk of an
answer as the stand-in (or a recorded fixture) sends it, which must be a
`GenerateContentResponse` with no field google-genai does not know (the stand-in answers as
Google does, or the tests prove nothing). Two more kinds hold context caching to Google's types:
`{"name": …, "backend": …, "cache_create": {…}}`, a `POST …/cachedContents` body, passes as a
generate body does (its fields known to `CreateCachedContentConfig`, and
`_CreateCachedContentParameters_to_mldev`/`_to_vertex` writing it back the same), and
`{"name": …, "cached_content": {…}}`, a cache as the stand-in answers it, must be a
`CachedContent`. Three kinds hold the Interactions API to google-genai's own types (its
`_gaos` package, generated): `{"name": …, "interaction_create": {…}}`, a `POST /v1beta/interactions`
body, must be a `CreateModelInteraction` (`agent_interaction_create`: an agent's run, a
`CreateAgentInteraction`); `{"name": …, "interaction": {…}}`, an interaction as
the stand-in answers it, an `Interaction`; `{"name": …, "interaction_event": {…}}`, one event of
its stream, an `InteractionSSEEvent`. Those types are pydantic models declared `extra='allow'`
and their unions and enums are open (an unknown `type` parses into an `Unknown…` variant, an
unknown enum value into `UnrecognizedStr`), so the check walks the parsed value and fails on
any extra field, unknown variant or unrecognised enum value, at any depth. A body passes when:

1. its top-level fields are ones the REST API has, and every field, at any depth, is known to
   google-genai's pydantic types (`Content`, `GenerateContentConfig` and all they hold; they are
   declared `extra='forbid'`): the REST body is camelCase, the SDK's aliases are too;
2. google-genai's own request converter (`_GenerateContentParameters_to_mldev`, or `_to_vertex`),
   fed the parameters the body was parsed into, writes back the same body: every field where
   the SDK would put it (`serviceTier` and `toolConfig` at the top, sampling in
   `generationConfig`…), nothing the converter refuses for that backend.

The comparison treats what the API treats alike: snake_case and camelCase keys (the SDK sends
its pass-through objects in snake_case), standard and URL-safe base64 for bytes, and the case of
enum values. Prints one line per failure and a closing `N passed, N failed` line; exits 1 when a
body fails.
"""

import base64
import json
import re
import sys
import warnings

from google.genai import _common, _transformers, caches, models, types  # noqa: F401
from google.genai._api_client import BaseApiClient

# The REST body's top-level fields, and the `GenerateContentConfig` field each is parsed into.
TOP_LEVEL = {
    "systemInstruction": "system_instruction",
    "tools": "tools",
    "toolConfig": "tool_config",
    "safetySettings": "safety_settings",
    "cachedContent": "cached_content",
    "labels": "labels",
    "serviceTier": "service_tier",
    "continuationToken": "continuation_token",
    "store": "store",
    "modelArmorConfig": "model_armor_config",
    "outputConfig": "generation_output_config",
}
# `generationConfig` fields whose REST name is not the config field's.
GENERATION_RENAMES = {"modelConfig": "model_selection_config"}
# Values that are bytes in the SDK (base64 on the wire).
BYTES_KEYS = {"thoughtSignature", "data", "continuationToken"}
ENUM_VALUE = re.compile(r"^[A-Za-z]+(_[A-Za-z0-9]+)*$")


def camel(key):
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def normal(value, key=None):
    """The body as the API reads it: keys camelCase, bytes (base64 of either alphabet) decoded."""
    if isinstance(value, dict):
        return {camel(k): normal(v, camel(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [normal(v, key) for v in value]
    if isinstance(value, str) and key in BYTES_KEYS:
        try:
            return base64.b64decode(value.replace("-", "+").replace("_", "/") + "==").hex()
        except ValueError:
            return value
    return value


def enum_insensitive(a, b):
    """`a` and `b` equal, but for the case of enum values (`"object"` and `"OBJECT"`)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(enum_insensitive(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(enum_insensitive(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str) and a != b:
        return bool(ENUM_VALUE.match(a)) and a.upper() == b.upper()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))
    return a == b


def differences(a, b, path="$"):
    """Where `a` (what we sent) and `b` (what the SDK would send) differ, as paths."""
    if enum_insensitive(a, b):
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in b:
                out.append(f"{path}.{k}: sent, but the SDK puts no such field there")
            elif k not in a:
                out.append(f"{path}.{k}: the SDK sends it, we do not")
            else:
                out.extend(differences(a[k], b[k], f"{path}.{k}"))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out.extend(differences(x, y, f"{path}[{i}]"))
        return out
    return [f"{path}: sent {json.dumps(a)[:200]}, the SDK would send {json.dumps(b)[:200]}"]


def client(backend):
    if backend == "vertex":
        return BaseApiClient(vertexai=True, project="p", location="global", credentials=_Anonymous())
    return BaseApiClient(vertexai=False, api_key="validator")


class _Anonymous:
    """Credentials that are never used: nothing is sent from here."""

    token = "unused"
    expired = False
    valid = True

    def refresh(self, _request):
        pass


def pydantic_errors(e, where):
    out = []
    for err in e.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        out.append(f"{where}.{loc}: {err.get('msg')} ({err.get('type')})")
    return out


def check(record):
    """The failures of one record (empty when it passes): an enum value google-genai does not
    know (it only warns of those) is one."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        problems = check_fields(record)
    for w in seen:
        if "is not a valid" in str(w.message):
            problems.append(f"an enum value google-genai does not know: {w.message}")
    return problems


def check_cache_create(record):
    """A `cachedContents` create body against `CreateCachedContentConfig` and the SDK's writer."""
    body = record["cache_create"]
    backend = record.get("backend", "api")
    config = {k: v for k, v in body.items() if k != "model"}
    try:
        parsed = types.CreateCachedContentConfig.model_validate_json(json.dumps(config))
    except Exception as e:  # pydantic.ValidationError
        return pydantic_errors(e, "$(config)") if hasattr(e, "errors") else [f"$(config): {e}"]
    params = types._CreateCachedContentParameters(model=body.get("model"), config=parsed)
    convert = (
        caches._CreateCachedContentParameters_to_vertex
        if backend == "vertex"
        else caches._CreateCachedContentParameters_to_mldev
    )
    try:
        sdk = convert(client(backend), params)
    except ValueError as e:
        return [f"google-genai refuses it for the {backend} backend: {e}"]
    sdk.pop("config", None)
    sdk = _common.encode_unserializable_types(_common.convert_to_dict(sdk))
    return differences(normal(body), normal(json.loads(json.dumps(sdk, default=str))))


def interaction_problems(kind, value):
    """An Interactions API value against its google-genai type, held strictly (see above)."""
    import pydantic
    from google.genai._gaos.types import interactions as gaos
    from google.genai._gaos.types.basemodel import UnrecognizedStr

    def strict(v, where):
        out = []
        if isinstance(v, UnrecognizedStr):
            out.append(f"{where}: a value google-genai does not know: {v!r}")
        elif isinstance(v, pydantic.BaseModel):
            if type(v).__name__.startswith("Unknown"):
                out.append(f"{where}: a variant google-genai does not know: {getattr(v, 'raw', None)}")
            for k in v.model_extra or {}:
                out.append(f"{where}.{k}: not a field of {type(v).__name__}")
            for k in type(v).model_fields:
                out.extend(strict(getattr(v, k), f"{where}.{k}"))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                out.extend(strict(x, f"{where}[{i}]"))
        elif isinstance(v, dict):
            for k, x in v.items():
                out.extend(strict(x, f"{where}.{k}"))
        return out

    target = {
        "interaction_create": gaos.CreateModelInteraction,
        "agent_interaction_create": gaos.CreateAgentInteraction,
        "interaction": gaos.Interaction,
        "interaction_event": gaos.InteractionSSEEvent,
    }[kind]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            parsed = pydantic.TypeAdapter(target).validate_python(value)
        except Exception as e:  # pydantic.ValidationError
            return pydantic_errors(e, "$") if hasattr(e, "errors") else [f"$: {e}"]
        return strict(parsed, "$")


def check_fields(record):
    for kind in ("interaction_create", "agent_interaction_create", "interaction", "interaction_event"):
        if kind in record:
            return interaction_problems(kind, record[kind])
    if "cache_create" in record:
        return check_cache_create(record)
    if "cached_content" in record:
        try:
            types.CachedContent.model_validate_json(json.dumps(record["cached_content"]))
        except Exception as e:  # pydantic.ValidationError
            return pydantic_errors(e, "$") if hasattr(e, "errors") else [f"$: {e}"]
        return []
    if "response" in record:
        try:
            types.GenerateContentResponse.model_validate_json(json.dumps(record["response"]))
        except Exception as e:  # pydantic.ValidationError
            return pydantic_errors(e, "$") if hasattr(e, "errors") else [f"$: {e}"]
        return []
    body = record.get("body")
    backend = record.get("backend", "api")
    if not isinstance(body, dict):
        return ["the body is not a JSON object"]
    errors = []
    unknown = sorted(set(body) - set(TOP_LEVEL) - {"contents", "generationConfig"})
    for k in unknown:
        errors.append(f"$.{k}: not a top-level field of generateContent")
    config = {}
    for k, v in (body.get("generationConfig") or {}).items():
        config[GENERATION_RENAMES.get(k, k)] = v
    for k, v in body.items():
        if k in TOP_LEVEL:
            name = TOP_LEVEL[k]
            if name in config or camel(name) in config:
                errors.append(f"$.{k}: also given inside generationConfig")
            config[name] = v
    contents = []
    for i, c in enumerate(body.get("contents") or []):
        try:
            contents.append(types.Content.model_validate_json(json.dumps(c)))
        except Exception as e:  # pydantic.ValidationError
            errors.extend(pydantic_errors(e, f"$.contents[{i}]") if hasattr(e, "errors") else [f"$.contents[{i}]: {e}"])
    try:
        parsed = types.GenerateContentConfig.model_validate_json(json.dumps(config))
    except Exception as e:
        errors.extend(pydantic_errors(e, "$(config)") if hasattr(e, "errors") else [f"$(config): {e}"])
        parsed = None
    if errors:
        return errors
    api = client(backend)
    params = types._GenerateContentParameters(model=record.get("model", "gemini"), contents=contents, config=parsed)
    convert = (
        models._GenerateContentParameters_to_vertex
        if backend == "vertex"
        else models._GenerateContentParameters_to_mldev
    )
    try:
        sdk = convert(api, params, None, params)
    except ValueError as e:
        return [f"google-genai refuses it for the {backend} backend: {e}"]
    sdk.pop("_url", None)
    sdk.pop("_query", None)
    sdk.pop("config", None)
    sdk = _common.encode_unserializable_types(_common.convert_to_dict(sdk))
    return differences(normal(body), normal(json.loads(json.dumps(sdk, default=str))))


def main(path):
    with open(path, encoding="utf-8") as f:
        records = json.load(f)
    failed = 0
    for record in records:
        problems = check(record)
        if problems:
            failed += 1
            for p in problems:
                print(f"FAIL {record.get('name')}: {p}")
    print(f"google-genai: {len(records) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
