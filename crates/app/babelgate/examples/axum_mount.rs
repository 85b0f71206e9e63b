//! The gateway mounted in an axum app: the app's own route at `/hello`,
//! the gateway's routes under `/agents` (gateway.toml paths are relative to
//! the mount point), and the demo agent behind it.
//!
//! ```sh
//! cargo run -p babelgate --example axum_mount
//! curl -N localhost:3000/agents/chat -H 'content-type: application/json' \
//!   -d '{"threadId":"t1","runId":"r1","messages":[{"id":"m1","role":"user","content":"hi"}]}'
//! ```
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use babelgate::config::Config;
use babelgate::conn::PeerAddr;
use babelgate::server::Gateway;
use babelgate_core::Dialect;
use tokio::net::TcpListener;

/// The app: its own route beside the gateway's.
pub fn app(gateway: Arc<Gateway>) -> Router {
    // Per-address rate limits need the client's address: axum's becomes ours.
    let gateway = tower::ServiceBuilder::new()
        .map_request(|mut req: http::Request<axum::body::Body>| {
            if let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>() {
                let peer = PeerAddr(*peer);
                req.extensions_mut().insert(peer);
            }
            req
        })
        .service(gateway.into_service());
    Router::new()
        .route("/hello", get(|| async { "hello from the app" }))
        .nest_service("/agents", gateway)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let agent = TcpListener::bind("127.0.0.1:0").await?;
    let agent_addr = agent.local_addr()?;
    tokio::spawn(babelgate::demo::serve(
        agent,
        Dialect::AgUi,
        Duration::from_millis(20),
    ));
    let config = Config::parse(&format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"ag-ui\"\n\
         upstream = \"http://{agent_addr}/agent\"\nupstream_protocol = \"ag-ui\"\n\
         [routes.rate_limit]\nrequests_per_s = 5.0\n"
    ))
    .map_err(|e| format!("{e:?}"))?;
    let gateway = Arc::new(Gateway::new(config)?);
    let listener = TcpListener::bind("127.0.0.1:3000").await?;
    println!("app on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        app(gateway).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
