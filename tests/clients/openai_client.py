"""The `openai` Python client against `sightline serve --openai` on the tiny fixture model.

Run by tests/all/serve_clients.rs, which starts the server: lists the models, gets a streamed
answer, a `json_schema` answer that validates against its schema (checked with `jsonschema`),
the `sightline` model's NextMove, and for each malformed request (bad base64, a 100 MB image,
a schema llguidance rejects, a missing model) a 4xx with a one-line message, the server
answering again after each. Prints one JSON line of what it saw; any failed expectation exits
non-zero with its reason.

Usage: openai_client.py BASE_URL TOKEN SCREENSHOT_PNG
"""

import base64
import json
import sys

import jsonschema
import openai

# A hang guard per request, not a speed target.
REQUEST_TIMEOUT_S = 120
# The oversized image of the issue: 100 MB of bytes, sent as a data URL.
HUGE_IMAGE_BYTES = 100 * 1024 * 1024

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "maxLength": 12},
        "count": {"type": "integer", "minimum": 0, "maximum": 9},
    },
    "required": ["label", "count"],
    "additionalProperties": False,
}


def fail(message):
    print(f"openai_client: {message}", file=sys.stderr)
    sys.exit(1)


def expect(condition, message):
    if not condition:
        fail(message)


def data_url(raw):
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def image_message(url, text):
    return [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": url}},
        {"type": "text", "text": text},
    ]}]


def refused(client, what, **request):
    """Sends a request that must fail with a 4xx; returns (status, message)."""
    try:
        client.chat.completions.create(**request)
    except openai.APIStatusError as e:
        status = e.status_code
        message = e.response.json()["error"]["message"]
    else:
        fail(f"{what}: answered instead of refused")
    expect(400 <= status < 500, f"{what}: status {status}: {message}")
    expect(message and "\n" not in message, f"{what}: not one line: {message!r}")
    still_serving(client, what)
    return status, message


def still_serving(client, after):
    answer = client.chat.completions.create(
        model="tiny-b", max_tokens=2, messages=[{"role": "user", "content": "again"}]
    )
    expect(answer.choices, f"no answer after {after}")


def main(base_url, token, screenshot):
    # No retries: a refusal must show as what the server answered.
    client = openai.OpenAI(base_url=base_url, api_key=token, timeout=REQUEST_TIMEOUT_S,
                           max_retries=0)
    seen = {}
    models = sorted(m.id for m in client.models.list())
    expect(models == ["sightline", "tiny-b"], f"models: {models}")
    seen["models"] = models

    stream = client.chat.completions.create(
        model="tiny-b", stream=True, max_tokens=6,
        messages=[{"role": "user", "content": "Say hello."}],
    )
    chunks = list(stream)
    expect(len(chunks) >= 3, f"{len(chunks)} chunks")
    expect(chunks[0].choices[0].delta.role == "assistant", f"first chunk: {chunks[0]}")
    finish = chunks[-1].choices[0].finish_reason
    expect(finish in ("length", "stop"), f"finish reason {finish}")
    seen["stream"] = {"chunks": len(chunks), "finish_reason": finish,
                      "text": "".join(c.choices[0].delta.content or "" for c in chunks)}

    with open(screenshot, "rb") as f:
        url = data_url(f.read())
    answer = client.chat.completions.create(
        model="tiny-b", max_tokens=64,
        messages=image_message(url, "Name the button and count the icons."),
        response_format={"type": "json_schema",
                         "json_schema": {"name": "button", "schema": SCHEMA, "strict": True}},
    )
    content = answer.choices[0].message.content
    try:
        parsed = json.loads(content)
        jsonschema.validate(parsed, SCHEMA)
    except (json.JSONDecodeError, jsonschema.ValidationError) as e:
        fail(f"json_schema answer {content!r}: {e}")
    seen["json_schema"] = parsed

    answer = client.chat.completions.create(
        model="sightline", messages=image_message(url, "Open the settings"),
    )
    move = json.loads(answer.choices[0].message.content)
    expect(isinstance(move, dict) and "kind" in move, f"sightline answered {move}")
    seen["sightline_kind"] = move["kind"]

    errors = {}
    errors["bad base64"] = refused(
        client, "bad base64", model="tiny-b",
        messages=image_message("data:image/png;base64,@@not-base64@@", "x"))
    huge = data_url(b"\x89PNG\r\n\x1a\n" + bytes(HUGE_IMAGE_BYTES - 8))
    errors["100 MB image"] = refused(
        client, "100 MB image", model="tiny-b", messages=image_message(huge, "x"))
    del huge
    errors["rejected schema"] = refused(
        client, "rejected schema", model="tiny-b",
        messages=[{"role": "user", "content": "x"}],
        response_format={"type": "json_schema", "json_schema": {
            "name": "bad", "schema": {"$ref": "#/definitions/missing"}}})
    errors["missing model"] = refused(
        client, "missing model", model="no-such-model",
        messages=[{"role": "user", "content": "x"}])
    expect(errors["missing model"][0] == 404, f"missing model: {errors['missing model']}")
    expect("no-such-model" in errors["missing model"][1], f"{errors['missing model']}")
    expect("base64" in errors["bad base64"][1], f"{errors['bad base64']}")
    seen["errors"] = {k: {"status": s, "message": m} for k, (s, m) in errors.items()}
    print(json.dumps(seen))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        fail(__doc__.strip().splitlines()[-1])
    main(*sys.argv[1:])
