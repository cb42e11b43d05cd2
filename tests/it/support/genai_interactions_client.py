"""Drives the stand-in Gemini's Interactions API with google-genai's own client (`client.interactions`).

Run by tests/it/wire_schema.rs as `python genai_interactions_client.py <base_url>`: the SDK parses
every answer and stream event into its types, so a shape the stand-in gets wrong fails here as it
would against a client built on the SDK. Prints one `ok <step>` line per step and exits 1 on the
first failure.
"""

import sys
import time

from google import genai

MODEL = "gemini-3.8-flash"


def main(base):
    client = genai.Client(api_key="k", http_options={"base_url": base})
    it = client.interactions.create(model=MODEL, input="Review this.", system_instruction="Be brief.")
    assert it.status == "completed", it
    assert it.output_text.startswith("FAKE-REPLY"), it.output_text
    assert it.usage.total_input_tokens > 0, it.usage
    print("ok create")

    nxt = client.interactions.create(model=MODEL, input="And now?", previous_interaction_id=it.id)
    assert "turns=2" in nxt.output_text, nxt.output_text
    print("ok previous_interaction_id")

    got = client.interactions.get(nxt.id)
    assert got.steps[0].type == "user_input", got.steps
    print("ok get")

    events = list(client.interactions.create(model=MODEL, input="Stream.", stream=True))
    kinds = [e.event_type for e in events]
    assert kinds[0] == "interaction.created" and kinds[-1] == "interaction.completed", kinds
    text = "".join(e.delta.text for e in events if e.event_type == "step.delta" and e.delta.type == "text")
    assert "turns=1" in text, text
    print("ok stream")

    replayed = [e.event_type for e in client.interactions.get(nxt.id, stream=True)]
    assert replayed[-1] == "interaction.completed", replayed
    print("ok get stream")

    run = client.interactions.create(model=MODEL, input="Long.", background=True)
    assert run.status == "in_progress", run
    cancelled = client.interactions.cancel(run.id)
    assert cancelled.status == "cancelled", cancelled
    client.interactions.delete(run.id)
    print("ok background, cancel, delete")

    try:
        client.interactions.get(run.id)
    except Exception as e:  # the SDK's client error
        print(f"ok deleted: {type(e).__name__}: {str(e)[:200]}")
    else:
        raise AssertionError("a deleted interaction was found")

    tools = [{"type": "function", "name": "read_file", "description": "Reads a file.",
              "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]
    called = client.interactions.create(model=MODEL, input="Investigate.", tools=tools)
    assert called.status == "requires_action", called
    call = next(s for s in called.steps if s.type == "function_call")
    assert call.name == "read_file" and call.arguments == {"path": "src/lib.rs"}, call
    done = client.interactions.create(
        model=MODEL, tools=tools, previous_interaction_id=called.id,
        input=[{"type": "function_result", "call_id": call.id, "name": call.name, "result": "fn main() {}"}],
    )
    assert done.status == "completed" and "turns=2" in done.output_text, done
    print("ok function call round")

    events = list(client.interactions.create(model=MODEL, input="Cite.", stream=True,
                                             tools=[{"type": "google_search"}]))
    notes = [a for e in events if e.event_type == "step.delta" and e.delta.type == "text_annotation_delta"
             for a in e.delta.annotations]
    assert notes and notes[0].type == "url_citation" and notes[0].url == "https://example.org/a", events
    print("ok streamed citations")

    run = client.interactions.create(agent="deep-research-preview-04-2026", input="Which crate?",
                                     background=True,
                                     agent_config={"type": "deep-research", "thinking_summaries": "auto"})
    assert run.status == "in_progress", run
    for _ in range(100):
        got = client.interactions.get(run.id)
        if got.status != "in_progress":
            break
        time.sleep(0.05)
    assert got.status == "completed", got
    out = next(s for s in got.steps if s.type == "model_output")
    cites = out.content[0].annotations
    assert cites[0].type == "url_citation" and cites[0].title == "A", out
    print("ok deep research run, polled")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
