//! The task as its client has been told it (what `GetTask` and
//! `CancelTask` answer), folded from the stream responses the encoder
//! wrote, as the SDKs' task managers fold them; and the v0.3 spelling of
//! v1.0 results, for clients that asked with v0.3 method names.

use serde_json::{json, Map, Value};

use crate::wire::{self, State};

/// A task built from the stream's results (v1.0 forms).
#[derive(Debug, Default)]
pub struct TaskView {
    id: String,
    context_id: String,
    status: Value,
    /// Artifacts in the order they came, each with its parts so far.
    artifacts: Vec<(String, Map<String, Value>)>,
    /// The messages of earlier statuses, oldest first: a status that gives
    /// way to the next one leaves its message here, as the SDKs' task
    /// managers keep a task's history.
    history: Vec<Value>,
}

impl TaskView {
    /// Takes in one stream response's `result`.
    pub fn apply(&mut self, result: &Value) {
        if let Some(task) = result.get("task") {
            self.id = str_of(task, "id");
            self.context_id = str_of(task, "contextId");
            self.status = task.get("status").cloned().unwrap_or(Value::Null);
            if let Some(Value::Array(h)) = task.get("history") {
                self.history.clone_from(h);
            }
        } else if let Some(update) = result.get("statusUpdate") {
            let next = update.get("status").cloned().unwrap_or(Value::Null);
            let status = std::mem::replace(&mut self.status, next);
            if let Some(message) = status.get("message") {
                self.history.push(message.clone());
            }
        } else if let Some(update) = result.get("artifactUpdate") {
            let Some(artifact) = update.get("artifact").and_then(Value::as_object) else {
                return;
            };
            let id = artifact
                .get("artifactId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let append = update.get("append").and_then(Value::as_bool) == Some(true);
            let parts = artifact.get("parts").and_then(Value::as_array);
            match self.artifacts.iter_mut().find(|(a, _)| *a == id) {
                Some((_, kept)) if append => {
                    for p in parts.into_iter().flatten() {
                        push_part(kept, p);
                    }
                }
                Some((_, kept)) => *kept = artifact.clone(),
                None => self.artifacts.push((id, artifact.clone())),
            }
        }
    }

    /// The task (v1.0 `Task`), its history cut to the `history_length`
    /// most recent messages when one was asked for (0: no history), as
    /// the spec's history length semantics have it.
    pub fn task(&self, history_length: Option<u64>) -> Value {
        let mut task = Map::new();
        task.insert("id".into(), json!(self.id));
        task.insert("contextId".into(), json!(self.context_id));
        task.insert("status".into(), self.status.clone());
        if !self.artifacts.is_empty() {
            let artifacts: Vec<Value> = self
                .artifacts
                .iter()
                .map(|(_, a)| Value::Object(a.clone()))
                .collect();
            task.insert("artifacts".into(), Value::Array(artifacts));
        }
        let len = self.history.len();
        let keep = history_length.map_or(len, |n| usize::try_from(n).map_or(len, |n| n.min(len)));
        if let Some(recent) = self.history.get(len - keep..).filter(|h| !h.is_empty()) {
            task.insert("history".into(), Value::Array(recent.to_vec()));
        }
        Value::Object(task)
    }
}

/// Appends a part; text that continues text extends it (the artifact's text
/// so far, one part, rather than a part per chunk); an empty text (a last
/// chunk's) adds nothing.
fn push_part(artifact: &mut Map<String, Value>, part: &Value) {
    let Some(parts) = artifact
        .entry("parts")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
    else {
        return;
    };
    if let Some(text) = part.get("text").and_then(Value::as_str) {
        if text.is_empty() {
            return;
        }
        let last = parts.last_mut().and_then(|p| p.get_mut("text"));
        if let Some(Value::String(s)) = last {
            s.push_str(text);
            return;
        }
    }
    parts.push(part.clone());
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A v1.0 stream response (`{"statusUpdate": {...}}`...) or task in v0.3's
/// spelling: `kind` discriminators, lowercase states, `kind`ed parts,
/// lowercase roles, and `final` on status updates.
pub fn to_v03(result: &Value) -> Value {
    let wrapped = [
        ("task", "task"),
        ("message", "message"),
        ("statusUpdate", "status-update"),
        ("artifactUpdate", "artifact-update"),
    ];
    for (key, kind) in wrapped {
        if let Some(body) = result.get(key) {
            return object_v03(body, kind);
        }
    }
    object_v03(result, "task")
}

fn object_v03(body: &Value, kind: &str) -> Value {
    let mut o = body.as_object().cloned().unwrap_or_default();
    o.insert("kind".into(), json!(kind));
    if let Some(status) = o.get_mut("status") {
        status_v03(status);
    }
    if kind == "status-update" {
        let state = o
            .get("status")
            .and_then(|s| s.get("state"))
            .and_then(Value::as_str)
            .map_or(State::Unknown, State::parse);
        let stops =
            state.is_terminal() || matches!(state, State::InputRequired | State::AuthRequired);
        o.insert("final".into(), json!(stops));
    }
    if let Some(Value::Array(artifacts)) = o.get_mut("artifacts") {
        for a in artifacts {
            parts_v03(a);
        }
    }
    if let Some(a) = o.get_mut("artifact") {
        parts_v03(a);
    }
    if let Some(Value::Array(history)) = o.get_mut("history") {
        for m in history.iter_mut().filter_map(Value::as_object_mut) {
            message_v03(m);
        }
    }
    if kind == "message" {
        message_v03(&mut o);
    }
    Value::Object(o)
}

fn status_v03(status: &mut Value) {
    let Some(s) = status.as_object_mut() else {
        return;
    };
    if let Some(state) = s.get("state").and_then(Value::as_str) {
        let v03 = State::parse(state).v03();
        s.insert("state".into(), json!(v03));
    }
    if let Some(Value::Object(m)) = s.get_mut("message") {
        message_v03(m);
    }
}

fn message_v03(m: &mut Map<String, Value>) {
    m.insert("kind".into(), json!("message"));
    let role = match m.get("role").and_then(Value::as_str) {
        Some("ROLE_USER") => "user",
        _ => "agent",
    };
    m.insert("role".into(), json!(role));
    if let Some(Value::Array(parts)) = m.get_mut("parts") {
        for p in parts {
            *p = part_v03(p);
        }
    }
}

fn parts_v03(artifact: &mut Value) {
    if let Some(Value::Array(parts)) = artifact.get_mut("parts") {
        for p in parts {
            *p = part_v03(p);
        }
    }
}

fn part_v03(p: &Value) -> Value {
    match wire::part(p) {
        wire::PartRef::Text(t) => json!({"kind": "text", "text": t}),
        wire::PartRef::Data(d) => json!({"kind": "data", "data": d}),
        wire::PartRef::File {
            url, media_type, ..
        } => match url
            .strip_prefix("data:")
            .and_then(|u| u.split_once(";base64,"))
        {
            Some((_, bytes)) => {
                json!({"kind": "file", "file": {"bytes": bytes, "mimeType": media_type}})
            }
            None => json!({"kind": "file", "file": {"uri": url, "mimeType": media_type}}),
        },
        wire::PartRef::Other => p.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_fold_into_the_artifact_text_so_far() {
        let mut view = TaskView::default();
        view.apply(&json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}}));
        view.apply(&json!({"statusUpdate": {"status": {"state": "TASK_STATE_WORKING"}}}));
        view.apply(&json!({"artifactUpdate": {"artifact": {"artifactId": "a", "parts": [{"text": "Hel"}]}}}));
        view.apply(&json!({"artifactUpdate": {"append": true, "artifact": {"artifactId": "a", "parts": [{"text": "lo"}]}}}));
        view.apply(&json!({"artifactUpdate": {"append": true, "lastChunk": true, "artifact": {"artifactId": "a", "parts": [{"text": ""}]}}}));
        let task = view.task(None);
        assert_eq!(task["contextId"], "c");
        assert_eq!(task["status"]["state"], "TASK_STATE_WORKING");
        assert_eq!(task["artifacts"][0]["parts"], json!([{"text": "Hello"}]));
        let old = to_v03(&task);
        assert_eq!(old["kind"], "task");
        assert_eq!(old["status"]["state"], "working");
        assert_eq!(
            old["artifacts"][0]["parts"],
            json!([{"kind": "text", "text": "Hello"}])
        );
    }

    #[test]
    fn a_status_that_gives_way_leaves_its_message_in_the_history() {
        let said = |t: &str| json!({"role": "ROLE_AGENT", "parts": [{"text": t}]});
        let mut view = TaskView::default();
        view.apply(&json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}}));
        for t in ["one", "two", "three"] {
            view.apply(&json!({"statusUpdate": {"status": {"state": "TASK_STATE_WORKING", "message": said(t)}}}));
        }
        view.apply(&json!({"statusUpdate": {"status": {"state": "TASK_STATE_COMPLETED"}}}));
        let all = view.task(None);
        assert_eq!(
            all["history"],
            json!([said("one"), said("two"), said("three")])
        );
        assert_eq!(
            view.task(Some(2))["history"],
            json!([said("two"), said("three")])
        );
        assert_eq!(view.task(Some(9))["history"], all["history"]);
        assert!(view.task(Some(0)).get("history").is_none(), "0: no history");
        let old = to_v03(&view.task(Some(1)));
        assert_eq!(old["history"][0]["kind"], "message");
        assert_eq!(old["history"][0]["role"], "agent");
        assert_eq!(old["history"][0]["parts"][0]["kind"], "text");
    }

    #[test]
    fn stream_responses_take_v03_kinds() {
        let r = to_v03(
            &json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_CANCELED", "message": {"role": "ROLE_AGENT", "parts": [{"text": "stopped"}]}}}}),
        );
        assert_eq!(r["kind"], "status-update");
        assert_eq!(r["final"], true);
        assert_eq!(r["status"]["state"], "canceled");
        assert_eq!(r["status"]["message"]["role"], "agent");
        assert_eq!(r["status"]["message"]["parts"][0]["kind"], "text");
    }
}
