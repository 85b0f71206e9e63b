//! The HTTP client of a route's upstream: the gateway's own HTTP/1.1
//! client ([`h1`]) where it fits (a plain `http` URL, no proxy in the
//! environment, no credentials in the URL), reqwest elsewhere (TLS,
//! proxies, credentials). Both give the same [`Response`].

pub mod body;
pub mod h1;

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::{HeaderMap, StatusCode};

/// Environment variables through which reqwest sends a plain-HTTP request
/// via a proxy: where one is set, reqwest keeps the route.
const PROXY_VARS: [&str; 4] = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"];

/// Whether the gateway's own client can take `url` as reqwest would:
/// `http`, no user or password (reqwest turns those into basic auth), and
/// no proxy that reqwest would read from the environment (`env`).
pub fn own_client_fits(url: &url::Url, env: impl Fn(&str) -> Option<String>) -> bool {
    url.scheme() == "http"
        && url.username().is_empty()
        && url.password().is_none()
        && PROXY_VARS
            .iter()
            .all(|k| env(k).is_none_or(|v| v.trim().is_empty()))
}

/// A route's upstream client.
#[derive(Debug, Clone)]
pub enum Client {
    Own(h1::Client),
    Reqwest(reqwest::Client),
}

/// Why a request got no response head, from either client.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(transparent)]
    Own(#[from] h1::Error),
    /// reqwest's error on one line, without the URL (which may carry a
    /// secret).
    #[error("{message}")]
    Reqwest { message: String, timeout: bool },
}

impl From<reqwest::Error> for SendError {
    fn from(e: reqwest::Error) -> Self {
        SendError::Reqwest {
            timeout: e.is_timeout(),
            message: error_chain(&e.without_url()),
        }
    }
}

impl SendError {
    pub fn is_timeout(&self) -> bool {
        match self {
            SendError::Own(e) => e.is_timeout(),
            SendError::Reqwest { timeout, .. } => *timeout,
        }
    }
}

/// An error and its sources on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

impl Client {
    /// A route's client: see [`own_client_fits`].
    pub fn for_route(
        url: &url::Url,
        connect_timeout: Duration,
        reqwest: impl FnOnce() -> Result<reqwest::Client, reqwest::Error>,
    ) -> Result<Client, reqwest::Error> {
        if own_client_fits(url, |k| std::env::var(k).ok()) {
            Ok(Client::Own(h1::Client::new(connect_timeout)))
        } else {
            reqwest().map(Client::Reqwest)
        }
    }

    /// POSTs `body` to `url` and reads the response head.
    pub async fn post(
        &self,
        url: &url::Url,
        headers: HeaderMap,
        body: String,
    ) -> Result<Response, SendError> {
        match self {
            Client::Own(c) => {
                let r = c.post(url, &headers, body.as_bytes()).await?;
                Ok(Response {
                    status: r.status,
                    headers: r.headers,
                    body: ResponseBody::Own(r.body),
                })
            }
            Client::Reqwest(c) => {
                let r = c
                    .post(url.clone())
                    .headers(headers)
                    .body(body)
                    .send()
                    .await?;
                Ok(Response {
                    status: r.status(),
                    headers: r.headers().clone(),
                    body: ResponseBody::Reqwest(Box::pin(r.bytes_stream())),
                })
            }
        }
    }
}

/// An upstream response whose head has been read.
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: ResponseBody,
}

type ReqwestBody = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Its body: a stream of bytes, or why the body could not be read on (one
/// line, no URL).
pub enum ResponseBody {
    Own(body::Body),
    Reqwest(ReqwestBody),
}

impl Stream for ResponseBody {
    type Item = Result<Bytes, String>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.get_mut() {
            ResponseBody::Own(b) => b
                .poll_next_unpin(cx)
                .map(|o| o.map(|r| r.map_err(|e| error_chain(&e)))),
            ResponseBody::Reqwest(b) => b
                .poll_next_unpin(cx)
                .map(|o| o.map(|r| r.map_err(|e| error_chain(&e.without_url())))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fits(url: &str, env: &[(&str, &str)]) -> bool {
        let url: url::Url = url.parse().unwrap();
        own_client_fits(&url, |k| {
            env.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn the_own_client_takes_plain_http_only_where_reqwest_would_go_direct() {
        assert!(fits("http://127.0.0.1:8000/agent", &[]));
        assert!(fits(
            "http://agent.internal/a?b=c",
            &[("HTTPS_PROXY", "http://p:3128")]
        ));
        assert!(fits("http://agent.internal/", &[("http_proxy", " ")]));
        assert!(!fits("https://agent.example/", &[]));
        assert!(!fits("ws://agent.internal/", &[]));
        assert!(!fits("http://user:secret@agent.internal/", &[]));
        assert!(!fits("http://user@agent.internal/", &[]));
        for var in PROXY_VARS {
            assert!(
                !fits("http://agent.internal/", &[(var, "http://proxy:3128")]),
                "{var}"
            );
        }
    }
}
