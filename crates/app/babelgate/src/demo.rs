//! A scripted agent that speaks any dialect, so that the gateway works out of
//! the box and tests have a predictable upstream. The script is written once
//! in core events and encoded with the dialect's own encoder.
//!
//! The user's last message picks the scenario: "weather" (server tool),
//! "background"/"color" (front-end tool), "state", "think"/"reason",
//! "confirm" (human in the loop), "error", "long" (many deltas); anything
//! else is echoed. A tool result or a resume answer gets an acknowledgement.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use babelgate_core::event::Interrupt;
use babelgate_core::request::RunRequest;
use babelgate_core::{Dialect, EncodeContext, Event, EventKind, IdGen, Outcome, Role, Shaper};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::error::{json_response, Body};
use crate::registry;

/// Runs the demo agent on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, protocol: Dialect, delay: Duration) {
    let agent = Arc::new(DemoAgent { protocol, delay });
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let agent = agent.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let agent = agent.clone();
                async move { Ok::<_, Infallible>(agent.handle(req).await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

struct DemoAgent {
    protocol: Dialect,
    delay: Duration,
}

impl DemoAgent {
    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        if req.method() != http::Method::POST {
            return json_response(
                StatusCode::METHOD_NOT_ALLOWED,
                &json!({"error": {"message": "POST a run request"}}),
            );
        }
        // Binary dialects answer in the binary transport when asked.
        let transport = crate::transport::negotiate(
            req.headers()
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok()),
            &registry::policy(self.protocol),
        );
        let body = match Limited::new(req.into_body(), 4 << 20).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    &json!({"error": {"message": e.to_string()}}),
                )
            }
        };
        let run = match registry::requests(self.protocol).parse_request(&body) {
            Ok(r) => r,
            Err(e) => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    &json!({"error": {"message": e.message, "field": e.field}}),
                )
            }
        };
        let script = Script::for_request(&run);
        let ctx = EncodeContext {
            thread_id: (!run.thread_id.is_empty()).then(|| run.thread_id.clone()),
            run_id: (!run.run_id.is_empty()).then(|| run.run_id.clone()),
            // The encoder writes the transport the caller negotiated.
            binary: matches!(transport, crate::transport::Transport::Proto(_)),
            ..Default::default()
        };
        let mut encoder = registry::encoder(self.protocol, ctx);
        let headers = encoder.headers();
        let (tx, rx) = mpsc::channel::<Bytes>(8);
        let delay = self.delay;
        tokio::spawn(async move {
            let mut out = Vec::new();
            for ev in script.into_events() {
                encoder.encode(&ev, &mut out);
                if tx
                    .send(Bytes::from(std::mem::take(&mut out)))
                    .await
                    .is_err()
                {
                    return; // the caller went away
                }
                tokio::time::sleep(delay).await;
            }
            encoder.finish(&mut out);
            let _ = tx.send(Bytes::from(out)).await;
        });
        crate::server::sse_response(rx, headers, transport)
    }
}

/// The events one demo run sends, in order.
struct Script {
    events: Vec<Event>,
    ids: IdGen,
}

impl Script {
    fn for_request(run: &RunRequest) -> Script {
        let mut s = Script {
            events: Vec::new(),
            ids: IdGen::default(),
        };
        let message_id = s.ids.next("msg");
        s.push(EventKind::RunStarted {
            thread_id: (!run.thread_id.is_empty()).then(|| run.thread_id.clone()),
            run_id: (!run.run_id.is_empty()).then(|| run.run_id.clone()),
            parent_run_id: None,
            message_id: Some(message_id),
            input: None,
        });
        let last = run.messages.last();
        let mut outcome = Outcome::Unspecified;
        if let Some(answer) = run.resume.first() {
            let yes = answer.status == "resolved"
                && answer.payload.as_ref().is_none_or(|p| !is_refusal(p));
            s.text(if yes {
                "Confirmed: the action was carried out."
            } else {
                "Cancelled: nothing was done."
            });
        } else if let Some(tool) = last.filter(|m| m.role == Role::Tool) {
            let result = match &tool.error {
                Some(e) => format!("failed ({e})"),
                None => tool.text(),
            };
            s.text(&format!("The tool finished: {result}. Anything else?"));
        } else {
            let said = last.map(|m| m.text()).unwrap_or_default();
            let lower = said.to_lowercase();
            if lower.contains("weather") {
                s.text("Let me look that up.");
                let call = s.tool_call("get_weather", r#"{"city":"北京"}"#);
                let result_id = s.ids.next("result");
                s.push(EventKind::ToolCallResult {
                    tool_call_id: call,
                    message_id: Some(result_id),
                    content: Value::String(r#"{"temperature":22,"condition":"sunny"}"#.into()),
                });
                s.text("It is sunny and 22 °C in 北京.");
            } else if lower.contains("background")
                || lower.contains("color")
                || lower.contains("colour")
            {
                s.text("Changing the background for you.");
                s.tool_call("change_background", r##"{"color":"#ff0000"}"##);
            } else if lower.contains("state") {
                s.push(EventKind::StateSnapshot {
                    snapshot: json!({"counter": 0, "items": []}),
                });
                s.push(EventKind::StateDelta {
                    patch: json!([
                        {"op": "replace", "path": "/counter", "value": 1},
                        {"op": "add", "path": "/items/-", "value": "apple"}
                    ]),
                });
                s.text("State updated: counter is 1.");
            } else if lower.contains("think") || lower.contains("reason") {
                let id = s.ids.next("reasoning");
                s.push(EventKind::ReasoningStart {
                    message_id: id.clone(),
                });
                for part in ["The user wants ", "me to think. ", "I will answer briefly."] {
                    s.push(EventKind::ReasoningDelta {
                        message_id: id.clone(),
                        delta: part.into(),
                    });
                }
                s.push(EventKind::ReasoningEnd { message_id: id });
                s.text("Thought about it: 42.");
            } else if lower.contains("confirm") {
                let call = s.tool_call("confirm_action", r#"{"action":"delete the files"}"#);
                let interrupt_id = s.ids.next("interrupt");
                outcome = Outcome::Interrupt {
                    interrupts: vec![Interrupt {
                        id: interrupt_id,
                        reason: "confirmation".into(),
                        message: Some("Delete the files?".into()),
                        tool_call_id: Some(call),
                        payload: None,
                        extra: Default::default(),
                    }],
                };
            } else if lower.contains("error") {
                s.text("Working on it");
                s.push(EventKind::RunError {
                    message: "the demo agent failed on purpose".into(),
                    code: Some("demo_error".into()),
                });
                return s;
            } else if lower.contains("long") {
                let id = s.ids.next("text");
                s.push(EventKind::text_start(id.clone()));
                for i in 0..200 {
                    s.push(EventKind::text_delta(id.clone(), format!("{i} ")));
                }
                s.push(EventKind::text_end(id));
            } else {
                s.text(&format!("你好! You said: {said} 🎉"));
            }
        }
        s.push(EventKind::run_finished(outcome));
        s
    }

    fn push(&mut self, kind: EventKind) {
        self.events.push(Event::new(kind));
    }

    /// What is sent: the script through the same shape stage as an upstream
    /// stream, so the demo's client sees what a translated run would show it
    /// (a front-end call left open ends the run with its pending id, text is
    /// closed before an error).
    fn into_events(self) -> Vec<Event> {
        Shaper::shape_all(&self.events)
    }

    /// One text message, streamed in small pieces like a model would.
    fn text(&mut self, text: &str) {
        let id = self.ids.next("text");
        self.push(EventKind::text_start(id.clone()));
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(6) {
            self.push(EventKind::text_delta(
                id.clone(),
                piece.iter().collect::<String>(),
            ));
        }
        self.push(EventKind::text_end(id));
    }

    /// A tool call with its arguments in two pieces; returns its id.
    fn tool_call(&mut self, name: &str, args: &str) -> String {
        let id = self.ids.next("call");
        self.push(EventKind::ToolCallStart {
            tool_call_id: id.clone(),
            tool_name: name.into(),
            parent_message_id: None,
        });
        let cut = args
            .char_indices()
            .nth(args.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        let (head, tail) = args.split_at_checked(cut).unwrap_or((args, ""));
        for piece in [head, tail] {
            self.push(EventKind::ToolCallArgs {
                tool_call_id: id.clone(),
                delta: piece.into(),
            });
        }
        self.push(EventKind::ToolCallEnd {
            tool_call_id: id.clone(),
        });
        id
    }
}

/// Whether a resume payload says no (`false`, `{"approved": false}`, "no").
fn is_refusal(payload: &Value) -> bool {
    match payload {
        Value::Bool(b) => !b,
        Value::String(s) => matches!(
            s.to_lowercase().as_str(),
            "no" | "false" | "cancel" | "reject"
        ),
        Value::Object(o) => ["approved", "confirmed", "accept"]
            .iter()
            .any(|k| o.get(*k) == Some(&Value::Bool(false))),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use babelgate_core::request::Message;

    fn run_saying(text: &str) -> RunRequest {
        RunRequest {
            thread_id: "t".into(),
            run_id: "r".into(),
            messages: vec![Message::text_message("u1", Role::User, text)],
            ..Default::default()
        }
    }

    fn kinds(s: &Script) -> Vec<&'static str> {
        s.events.iter().map(|e| e.kind.name()).collect()
    }

    #[test]
    fn scenarios_are_picked_by_the_last_message() {
        let weather = Script::for_request(&run_saying("What's the weather?"));
        assert!(kinds(&weather).contains(&"tool_call_result"));
        let bg = Script::for_request(&run_saying("make the background red"));
        assert!(kinds(&bg).contains(&"tool_call_end"));
        assert!(
            !kinds(&bg).contains(&"tool_call_result"),
            "the client runs it"
        );
        let err = Script::for_request(&run_saying("error please"));
        assert_eq!(kinds(&err).last(), Some(&"run_error"));
        let confirm = Script::for_request(&run_saying("confirm"));
        match &confirm.events.last().unwrap().kind {
            EventKind::RunFinished {
                outcome: Outcome::Interrupt { interrupts },
                ..
            } => assert!(interrupts[0].tool_call_id.is_some()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn what_is_sent_goes_through_the_shape_stage() {
        let bg = Script::for_request(&run_saying("make the background red")).into_events();
        let call = bg.iter().find_map(|e| match &e.kind {
            EventKind::ToolCallStart { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        });
        match &bg.last().unwrap().kind {
            EventKind::RunFinished {
                outcome:
                    Outcome::Success {
                        pending_tool_call_ids,
                    },
                ..
            } => assert_eq!(Some(pending_tool_call_ids.clone()), call.map(|c| vec![c])),
            other => panic!("{other:?}"),
        }
        let err = Script::for_request(&run_saying("error please")).into_events();
        let names: Vec<_> = err.iter().map(|e| e.kind.name()).collect();
        assert_eq!(names[names.len() - 2..], ["text_end", "run_error"]);
    }

    #[test]
    fn tool_results_and_resumes_are_acknowledged() {
        let mut run = run_saying("x");
        run.messages.push(Message {
            id: "t1".into(),
            role: Role::Tool,
            tool_call_id: Some("c".into()),
            content: vec![babelgate_core::request::Part::Text {
                text: "done".into(),
            }],
            ..Default::default()
        });
        let s = Script::for_request(&run);
        let text: String = s
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::TextDelta { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert!(text.contains("done"), "{text}");
        assert!(is_refusal(&json!({"approved": false})));
        assert!(!is_refusal(&json!(true)));
    }
}
