//! What a browser page needs from the gateway beyond the stream: cookies
//! across origins (`allow_credentials`) and error answers it can read.

use crate::common;

use common::{agui_hi, gateway, listener, run_cli};

const APP: &str = "https://app.example";

async fn gateway_with(cors: &str) -> std::net::SocketAddr {
    let (l, agent) = listener().await;
    tokio::spawn(babelgate::demo::serve(
        l,
        babelgate_core::Dialect::AgUi,
        std::time::Duration::ZERO,
    ));
    let toml = format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"ag-ui\"\nupstream = \"http://{agent}/agent\"\nupstream_protocol = \"ag-ui\"\n[routes.cors]\n{cors}\n"
    );
    gateway(&toml).await.0
}

fn header(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

#[tokio::test]
async fn a_route_may_allow_credentials_for_its_listed_origins() {
    let gw = gateway_with(&format!(
        "allow_origins = [\"{APP}\"]\nallow_credentials = true"
    ))
    .await;
    let client = reqwest::Client::new();
    let r = client
        .request(reqwest::Method::OPTIONS, format!("http://{gw}/chat"))
        .header("origin", APP)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(
        header(&r, "access-control-allow-origin").as_deref(),
        Some(APP)
    );
    assert_eq!(
        header(&r, "access-control-allow-credentials").as_deref(),
        Some("true")
    );
    let r = client
        .post(format!("http://{gw}/chat"))
        .header("origin", APP)
        .header("content-type", "application/json")
        .header("cookie", "session=abc")
        .body(agui_hi("t-cred"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "access-control-allow-credentials").as_deref(),
        Some("true")
    );
    assert!(r.text().await.unwrap().contains("RUN_FINISHED"));
    // Another origin gets neither header.
    let r = client
        .post(format!("http://{gw}/chat"))
        .header("origin", "https://evil.example")
        .header("content-type", "application/json")
        .body(agui_hi("t-evil"))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "access-control-allow-origin"), None);
    assert_eq!(header(&r, "access-control-allow-credentials"), None);
}

#[tokio::test]
async fn without_the_key_no_credentials_are_allowed() {
    let gw = gateway_with(&format!("allow_origins = [\"{APP}\"]")).await;
    let r = reqwest::Client::new()
        .post(format!("http://{gw}/chat"))
        .header("origin", APP)
        .header("content-type", "application/json")
        .body(agui_hi("t-nocred"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        header(&r, "access-control-allow-origin").as_deref(),
        Some(APP)
    );
    assert_eq!(header(&r, "access-control-allow-credentials"), None);
}

#[tokio::test]
async fn an_unknown_path_answers_a_404_an_allowed_origin_can_read() {
    let gw = gateway_with(&format!(
        "allow_origins = [\"{APP}\"]\nallow_credentials = true"
    ))
    .await;
    let client = reqwest::Client::new();
    // The preflight of a JSON POST to a path no route serves passes for an
    // origin some route allows, so the page gets to see the 404 ...
    let pre = |origin: &'static str| {
        client
            .request(reqwest::Method::OPTIONS, format!("http://{gw}/chta"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let r = pre(APP).await.unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(
        header(&r, "access-control-allow-origin").as_deref(),
        Some(APP)
    );
    let r = client
        .post(format!("http://{gw}/chta"))
        .header("origin", APP)
        .header("content-type", "application/json")
        .body(agui_hi("t-404"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        header(&r, "access-control-allow-origin").as_deref(),
        Some(APP)
    );
    assert_eq!(
        header(&r, "access-control-allow-credentials").as_deref(),
        Some("true")
    );
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "no_route");
    // ... and a 4xx on the route before the stream as well.
    let r = client
        .post(format!("http://{gw}/chat"))
        .header("origin", APP)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error(), "{}", r.status());
    assert_eq!(
        header(&r, "access-control-allow-origin").as_deref(),
        Some(APP)
    );
    // An origin no route allows learns nothing more than before.
    let r = pre("https://evil.example").await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(header(&r, "access-control-allow-origin"), None);
    let r = client
        .get(format!("http://{gw}/chta"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(header(&r, "access-control-allow-origin"), None);
    // A successful answer outside any route (health) is not lent a policy.
    let r = client
        .get(format!("http://{gw}/healthz"))
        .header("origin", APP)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "access-control-allow-origin"), None);
}

#[test]
fn check_refuses_credentials_with_a_wildcard_origin_at_its_line() {
    let dir = std::env::temp_dir().join(format!("babelgate-frontend-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.toml");
    std::fs::write(
        &file,
        "[[routes]]\npath = \"/a\"\nclient = \"vercel\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n[routes.cors]\nallow_origins = [\"*\"]\nallow_credentials = true\n",
    )
    .unwrap();
    let (code, _, err) = run_cli(&["check", "--config", file.to_str().unwrap()], b"");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("gateway.toml:8:21: routes.cors.allow_credentials: not with `*`"),
        "{err}"
    );
    // Listing the origin instead is accepted.
    std::fs::write(
        &file,
        "[[routes]]\npath = \"/a\"\nclient = \"vercel\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n[routes.cors]\nallow_origins = [\"https://app.example\"]\nallow_credentials = true\n",
    )
    .unwrap();
    let (code, _, err) = run_cli(&["check", "--config", file.to_str().unwrap()], b"");
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
