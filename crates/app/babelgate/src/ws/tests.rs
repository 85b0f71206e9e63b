use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::{header, HeaderMap, HeaderValue, Method, Request, StatusCode};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::session::*;
use super::upstream::*;
use super::*;
use crate::config::Route;
use crate::error::UpstreamFault;
use crate::transport::Read;

fn get(headers: &[(&str, &str)]) -> Request<()> {
    let mut b = Request::builder().method(Method::GET).uri("/r");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap()
}

#[test]
fn upgrade_needs_get_upgrade_and_connection_tokens() {
    let up = [
        ("upgrade", "WebSocket"),
        ("connection", "keep-alive, Upgrade"),
    ];
    assert!(is_upgrade(&get(&up)));
    assert!(!is_upgrade(&get(&up[..1])), "no Connection: upgrade");
    assert!(!is_upgrade(&get(&[
        ("upgrade", "h2c"),
        ("connection", "upgrade")
    ])));
    let mut post = get(&up);
    *post.method_mut() = Method::POST;
    assert!(!is_upgrade(&post));
}

#[test]
fn subprotocol_is_the_first_known_offer() {
    let h = |v: &str| get(&[("sec-websocket-protocol", v)]).headers().clone();
    assert_eq!(pick_subprotocol(&HeaderMap::new()).unwrap(), None);
    assert_eq!(
        pick_subprotocol(&h("x-other, AG-UI.PROTO, ag-ui.json")).unwrap(),
        Some(SUBPROTOCOL_PROTO)
    );
    assert_eq!(
        pick_subprotocol(&h("ag-ui.json")).unwrap(),
        Some(SUBPROTOCOL_JSON)
    );
    let e = pick_subprotocol(&h("x-other")).unwrap_err();
    assert_eq!(
        (e.status, e.code),
        (StatusCode::BAD_REQUEST, "unsupported_subprotocol")
    );
}

#[test]
fn inner_request_keeps_auth_and_drops_the_upgrade() {
    let up = get(&[
        ("upgrade", "websocket"),
        ("connection", "upgrade"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("sec-websocket-version", "13"),
        ("sec-websocket-protocol", "ag-ui.proto"),
        ("authorization", "Bearer k"),
    ]);
    let h = inner_headers(up.headers(), false);
    assert_eq!(h.get("authorization").unwrap(), "Bearer k");
    assert_eq!(h.get("accept").unwrap(), "text/event-stream");
    assert_eq!(h.get("content-type").unwrap(), "application/json");
    for gone in [
        "upgrade",
        "connection",
        "sec-websocket-key",
        "sec-websocket-protocol",
    ] {
        assert!(h.get(gone).is_none(), "{gone}");
    }
    let proto = inner_headers(up.headers(), true);
    assert!(proto
        .get("accept")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with(PROTO_MEDIA_TYPE));
}

#[test]
fn close_reason_is_cut_to_123_bytes_on_a_char_boundary() {
    let long = "é".repeat(100);
    let Message::Close(Some(f)) = close_frame(CloseCode::Policy, &long) else {
        panic!("a close");
    };
    assert_eq!(f.reason.len(), 122);
    assert!(f.reason.as_str().chars().all(|c| c == 'é'));
}

#[test]
fn each_body_frame_is_one_message_of_the_session_s_kind() {
    assert_eq!(
        message_of(Bytes::from_static(b"{\"a\":1}"), false),
        Some(Message::text("{\"a\":1}"))
    );
    assert_eq!(
        message_of(Bytes::from_static(&[8, 1]), true),
        Some(Message::binary(vec![8u8, 1]))
    );
    assert_eq!(message_of(Bytes::from_static(&[0xff]), false), None);
}

/// A WebSocket server on a free port that runs `script` on its first
/// connection and reports what it saw.
async fn upstream<F, Fut>(script: F) -> (String, tokio::task::JoinHandle<Vec<Message>>)
where
    F: FnOnce(WebSocketStream<tokio::net::TcpStream>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Vec<Message>> + Send,
{
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/up", l.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        script(tokio_tungstenite::accept_async(s).await.unwrap()).await
    });
    (url, task)
}

fn route(url: &str) -> Route {
    let toml = format!(
        "[[routes]]\npath = \"/r\"\nclient = \"ag-ui\"\nupstream = \"{url}\"\nupstream_protocol = \"ag-ui\"\n"
    );
    crate::config::Config::parse(&toml)
        .unwrap()
        .routes
        .remove(0)
}

/// The messages read, each as it came, and how the stream ended (the
/// reads they came in are timing, not meaning).
async fn drain(mut s: UpstreamWs) -> (Vec<Bytes>, Option<UpstreamFault>) {
    let mut got = Vec::new();
    while let Some(i) = s.next().await {
        match i {
            Ok(Read::Messages(m)) => got.extend(m),
            Ok(Read::Bytes(b)) => panic!("bytes from a message transport: {b:?}"),
            Err(e) => {
                assert!(s.next().await.is_none(), "nothing after the error");
                return (got, Some(e));
            }
        }
    }
    (got, None)
}

#[tokio::test]
async fn upstream_text_messages_are_events_as_sent_until_a_normal_close() {
    let (url, seen) = upstream(|mut ws| async move {
        let first = ws.next().await.unwrap().unwrap();
        ws.send(Message::text("{\"a\":1}")).await.unwrap();
        ws.send(Message::text("two\nlines")).await.unwrap();
        ws.close(None).await.unwrap();
        vec![first]
    })
    .await;
    let s = open_upstream(&route(&url), HeaderMap::new(), "{\"req\":1}".into())
        .await
        .unwrap();
    assert_eq!(
        drain(s).await,
        (
            vec![Bytes::from("{\"a\":1}"), Bytes::from("two\nlines")],
            None
        )
    );
    assert_eq!(seen.await.unwrap(), vec![Message::text("{\"req\":1}")]);
}

#[tokio::test]
async fn messages_ready_together_reach_the_pump_as_one_chunk() {
    let (url, sent) = upstream(|mut ws| async move {
        let first = ws.next().await.unwrap().unwrap();
        for n in 0..3 {
            ws.send(Message::text(format!("{{\"n\":{n}}}")))
                .await
                .unwrap();
        }
        ws.close(None).await.unwrap();
        vec![first]
    })
    .await;
    let mut s = open_upstream(&route(&url), HeaderMap::new(), "{}".into())
        .await
        .unwrap();
    // All sent (loopback: all received) before the first read.
    sent.await.unwrap();
    let Read::Messages(read) = s.next().await.unwrap().unwrap() else {
        panic!("messages");
    };
    assert_eq!(read, ["{\"n\":0}", "{\"n\":1}", "{\"n\":2}"]);
    assert!(s.next().await.is_none(), "then the normal close");
}

#[tokio::test]
async fn upstream_binary_is_malformed_and_an_odd_close_an_error() {
    let (url, _seen) = upstream(|mut ws| async move {
        ws.next().await;
        ws.send(Message::binary(vec![0u8, 1])).await.unwrap();
        vec![]
    })
    .await;
    let s = open_upstream(&route(&url), HeaderMap::new(), "{}".into())
        .await
        .unwrap();
    let (got, end) = drain(s).await;
    assert!(got.is_empty());
    assert!(
        matches!(&end, Some(UpstreamFault::Malformed(why)) if why.contains("binary")),
        "{end:?}"
    );

    let (url, _seen) = upstream(|mut ws| async move {
        ws.next().await;
        ws.close(Some(CloseFrame {
            code: CloseCode::Library(4000),
            reason: "no".into(),
        }))
        .await
        .unwrap();
        vec![]
    })
    .await;
    let s = open_upstream(&route(&url), HeaderMap::new(), "{}".into())
        .await
        .unwrap();
    let (_, end) = drain(s).await;
    assert!(
        matches!(&end, Some(UpstreamFault::Connection(why)) if why.contains("4000")),
        "{end:?}"
    );
}

/// A WebSocket server that answers each handshake with `answer` (the
/// subprotocol it accepts, if any), notes what each offered, and runs
/// `script` on the `nth` connection (earlier ones are dropped).
async fn negotiating_upstream<F, Fut>(
    answer: Option<&'static str>,
    nth: usize,
    script: F,
) -> (
    String,
    tokio::task::JoinHandle<(Vec<Option<String>>, Vec<Message>)>,
)
where
    F: FnOnce(WebSocketStream<tokio::net::TcpStream>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Vec<Message>> + Send,
{
    use tokio_tungstenite::tungstenite::handshake::server::{Request as Hs, Response as HsResp};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/up", l.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let offered = Arc::new(std::sync::Mutex::new(Vec::new()));
        for i in 1..=nth {
            let (s, _) = l.accept().await.unwrap();
            let seen = offered.clone();
            // The callback's type is tungstenite's.
            #[allow(clippy::result_large_err)]
            let cb = move |req: &Hs, mut resp: HsResp| {
                let o = req
                    .headers()
                    .get(header::SEC_WEBSOCKET_PROTOCOL)
                    .map(|v| v.to_str().unwrap().to_string());
                seen.lock().unwrap().push(o);
                if let Some(a) = answer {
                    resp.headers_mut()
                        .insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(a));
                }
                Ok(resp)
            };
            let ws = tokio_tungstenite::accept_hdr_async(s, cb).await.unwrap();
            if i == nth {
                let got = script(ws).await;
                let offered = offered.lock().unwrap().clone();
                return (offered, got);
            }
        }
        unreachable!()
    });
    (url, task)
}

fn route_on(url: &str, transport: &str) -> Route {
    let toml = format!(
        "[[routes]]\npath = \"/r\"\nclient = \"ag-ui\"\nupstream = \"{url}\"\nupstream_protocol = \"ag-ui\"\nupstream_transport = \"{transport}\"\n"
    );
    crate::config::Config::parse(&toml)
        .unwrap()
        .routes
        .remove(0)
}

fn run_started() -> Vec<u8> {
    babelgate_proto::encode_event_as(
        &serde_json::json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
        None,
    )
    .unwrap()
}

#[tokio::test]
async fn proto_routes_offer_binary_then_json_and_read_binary_messages_as_frames() {
    for transport in ["proto", "auto"] {
        let (url, seen) = negotiating_upstream(Some(SUBPROTOCOL_PROTO), 1, |mut ws| async move {
            let first = ws.next().await.unwrap().unwrap();
            ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
            ws.send(Message::binary(Vec::<u8>::new())).await.unwrap();
            ws.close(None).await.unwrap();
            vec![first]
        })
        .await;
        let s = open_upstream(&route_on(&url, transport), HeaderMap::new(), "{}".into())
            .await
            .unwrap();
        assert!(s.is_binary());
        // Each message as it came, an empty one too: no length prefix.
        assert_eq!(
            drain(s).await,
            (vec![Bytes::from(vec![1u8, 2, 3]), Bytes::new()], None)
        );
        let (offered, first) = seen.await.unwrap();
        assert_eq!(offered, vec![Some("ag-ui.proto, ag-ui.json".to_string())]);
        // The request still goes up as text.
        assert_eq!(first, vec![Message::text("{}")]);
    }
}

#[tokio::test]
async fn a_text_message_on_a_binary_session_is_malformed() {
    let (url, _seen) = negotiating_upstream(Some(SUBPROTOCOL_PROTO), 1, |mut ws| async move {
        ws.next().await;
        ws.send(Message::binary(run_started())).await.unwrap();
        ws.send(Message::text("{\"type\":\"RUN_FINISHED\"}"))
            .await
            .unwrap();
        ws.send(Message::binary(run_started())).await.unwrap();
        vec![]
    })
    .await;
    let s = open_upstream(&route_on(&url, "auto"), HeaderMap::new(), "{}".into())
        .await
        .unwrap();
    let (got, end) = drain(s).await;
    assert_eq!(got, [Bytes::from(run_started())]);
    assert!(
        matches!(&end, Some(UpstreamFault::Malformed(why)) if why.contains("text")),
        "{end:?}"
    );
}

#[tokio::test]
async fn json_accepted_reads_text_and_refuses_binary() {
    let (url, seen) = negotiating_upstream(Some(SUBPROTOCOL_JSON), 1, |mut ws| async move {
        ws.next().await;
        ws.send(Message::text("{\"a\":1}")).await.unwrap();
        ws.send(Message::binary(run_started())).await.unwrap();
        vec![]
    })
    .await;
    let s = open_upstream(&route_on(&url, "proto"), HeaderMap::new(), "{}".into())
        .await
        .unwrap();
    assert!(!s.is_binary());
    let (got, end) = drain(s).await;
    assert_eq!(got, ["{\"a\":1}"]);
    assert!(matches!(end, Some(UpstreamFault::Malformed(_))), "{end:?}");
    assert_eq!(seen.await.unwrap().0.len(), 1);
}

#[tokio::test]
async fn no_subprotocol_accepted_connects_again_for_json() {
    // A server that does not negotiate: it answers no subprotocol.
    let (url, seen) = negotiating_upstream(None, 2, |mut ws| async move {
        let first = ws.next().await.unwrap().unwrap();
        ws.send(Message::text("{\"a\":1}")).await.unwrap();
        ws.close(None).await.unwrap();
        vec![first]
    })
    .await;
    let s = open_upstream(
        &route_on(&url, "proto"),
        HeaderMap::new(),
        "{\"q\":1}".into(),
    )
    .await
    .unwrap();
    assert!(!s.is_binary());
    assert_eq!(drain(s).await, (vec![Bytes::from("{\"a\":1}")], None));
    let (offered, first) = seen.await.unwrap();
    assert_eq!(
        offered,
        vec![Some("ag-ui.proto, ag-ui.json".to_string()), None],
        "offered both, then none"
    );
    assert_eq!(first, vec![Message::text("{\"q\":1}")]);
}

#[tokio::test]
async fn an_sse_route_offers_no_subprotocol() {
    let (url, seen) = negotiating_upstream(None, 1, |mut ws| async move {
        ws.next().await;
        ws.close(None).await.unwrap();
        vec![]
    })
    .await;
    let s = open_upstream(&route(&url), HeaderMap::new(), "{}".into())
        .await
        .unwrap();
    assert!(!s.is_binary());
    drain(s).await;
    assert_eq!(seen.await.unwrap().0, vec![None]);
}

#[tokio::test]
async fn a_dropped_upstream_is_closed_with_going_away() {
    let (url, seen) = upstream(|mut ws| async move {
        ws.next().await;
        let mut got = Vec::new();
        while let Some(Ok(m)) = ws.next().await {
            got.push(m);
        }
        got
    })
    .await;
    let s = open_upstream(&route(&url), HeaderMap::new(), "{}".into())
        .await
        .unwrap();
    drop(s);
    let got = tokio::time::timeout(Duration::from_secs(30), seen)
        .await
        .unwrap()
        .unwrap();
    let Some(Message::Close(Some(f))) = got.last() else {
        panic!("no close: {got:?}");
    };
    assert_eq!(f.code, CloseCode::Away);
}

#[tokio::test]
async fn wss_checks_the_certificate() {
    // A TLS server with a certificate no root vouches for.
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::try_from(cert.key_pair.serialize_der()).unwrap(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("wss://localhost:{}/up", l.local_addr().unwrap().port());
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        acceptor.accept(s).await.is_ok()
    });
    let Err(e) = open_upstream(&route(&url), HeaderMap::new(), "{}".into()).await else {
        panic!("connected to an untrusted server");
    };
    assert_eq!(e.code, "upstream_unreachable");
    assert!(!server.await.unwrap(), "the client refused the handshake");
}

#[tokio::test]
async fn nothing_listening_is_unreachable() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", l.local_addr().unwrap());
    drop(l);
    let Err(e) = open_upstream(&route(&url), HeaderMap::new(), "{}".into()).await else {
        panic!("connected");
    };
    assert_eq!(e.code, "upstream_unreachable");
}
