use super::*;

fn chunk(v: serde_json::Value) -> GenerateContentResponse {
    serde_json::from_value(v).unwrap()
}

#[test]
fn a_turn_of_function_calls_is_an_answer_and_is_kept_for_replay() {
    let mut a = Answer::default();
    a.take(chunk(serde_json::json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Looking."}]}}]})));
    a.take(chunk(serde_json::json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "list_files", "args": {}, "id": "c1"}, "thoughtSignature": "U0lH"},
        {"functionCall": {"name": "read_file", "args": {"path": "a.rs"}}},
        {"text": "", "thought": true},
        {"text": ""}
    ]}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3}})));
    let r = a.finish().unwrap();
    assert_eq!(r.text, "Looking.");
    let calls: Vec<(Option<&str>, &str)> = r
        .calls
        .iter()
        .map(|c| (c.id.as_deref(), c.name.as_str()))
        .collect();
    assert_eq!(calls, [(Some("c1"), "list_files"), (None, "read_file")]);
    assert_eq!(r.calls[1].args, serde_json::json!({"path": "a.rs"}));
    // Empty text parts without a signature and thought summaries are not replayed.
    let turn: Vec<serde_json::Value> = r
        .turn
        .iter()
        .map(|p| match p {
            super::super::Part::Recorded(v) => v.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(turn.len(), 3);
    assert_eq!(turn[1]["thoughtSignature"], "U0lH");

    // Calls alone (no text) are an answer, not an empty one.
    let mut a = Answer::default();
    a.take(chunk(
        serde_json::json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "list_files", "args": {}}}
    ]}, "finishReason": "STOP"}]}),
    ));
    let r = a.finish().unwrap();
    assert!(r.text.is_empty() && r.calls.len() == 1);
    // Neither text nor calls: still the empty-answer failure.
    let mut a = Answer::default();
    a.take(chunk(serde_json::json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}]})));
    assert!(matches!(
        a.finish().unwrap_err().error,
        GeminiError::Empty { .. }
    ));
}
