//! Who may use a route and what crosses it: bearer keys, CORS for browser
//! clients, the header allowlist towards the upstream, request ids.

use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};

use crate::config::{Cors, Keys, Route};
use crate::error::{Body, GatewayError};

/// Checks `authorization: Bearer <key>` against the route's keys.
pub fn authorize(route: &Route, headers: &HeaderMap) -> Result<(), GatewayError> {
    let Some(keys) = &route.auth else {
        return Ok(());
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, key) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| key.trim())
        });
    match presented {
        Some(key) if accepts(keys, key) => Ok(()),
        Some(_) => Err(GatewayError::client(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the bearer key is not accepted on this route",
        )),
        None => Err(GatewayError::client(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this route needs `authorization: Bearer <key>`",
        )),
    }
}

/// Compares against every key without stopping early, so the time taken does
/// not tell how much of a key was right.
fn accepts(keys: &Keys, presented: &str) -> bool {
    let p = presented.as_bytes();
    let mut any = false;
    for k in &keys.0 {
        let k = k.as_bytes();
        let mut diff = (k.len() != p.len()) as u8;
        for (i, b) in k.iter().enumerate() {
            diff |= b ^ p.get(i).copied().unwrap_or(0);
        }
        any |= diff == 0;
    }
    any
}

/// The origin to allow for this request, when the route's CORS policy
/// allows it.
pub fn allowed_origin<'a>(cors: &Cors, headers: &'a HeaderMap) -> Option<&'a HeaderValue> {
    let origin = headers.get(header::ORIGIN)?;
    let o = origin.to_str().ok()?;
    cors.allow_origins
        .iter()
        .any(|a| a == "*" || a.eq_ignore_ascii_case(o))
        .then_some(origin)
}

/// Adds the CORS response headers for an allowed origin.
pub fn decorate(route: Option<&Route>, req_headers: &HeaderMap, resp: &mut Response<Body>) {
    let Some(cors) = route.and_then(|r| r.cors.as_ref()) else {
        return;
    };
    let Some(origin) = allowed_origin(cors, req_headers) else {
        return;
    };
    let h = resp.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    h.append(header::VARY, HeaderValue::from_static("origin"));
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("x-request-id, x-vercel-ai-ui-message-stream"),
    );
}

/// Answers a CORS preflight (`OPTIONS` with `access-control-request-method`).
pub fn preflight(route: &Route, req_headers: &HeaderMap) -> Result<Response<Body>, GatewayError> {
    let Some(cors) = &route.cors else {
        return Err(GatewayError::client(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("{}: no CORS policy on this route", route.path),
        ));
    };
    if allowed_origin(cors, req_headers).is_none() {
        return Err(GatewayError::client(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "this origin is not allowed on this route",
        ));
    }
    let mut resp = Response::new(crate::error::full(bytes::Bytes::new()));
    *resp.status_mut() = StatusCode::NO_CONTENT;
    let h = resp.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST, GET, OPTIONS"),
    );
    if let Ok(v) = HeaderValue::from_str(&cors.allow_headers.join(", ")) {
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, v);
    }
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from(cors.max_age.as_secs()),
    );
    Ok(resp)
}

pub fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::OPTIONS && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// The client headers the route lets through to the upstream.
pub fn forwarded(route: &Route, headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in &route.forward_headers {
        for v in headers.get_all(name.as_str()) {
            if let Ok(n) = http::HeaderName::from_bytes(name.as_bytes()) {
                out.append(n, v.clone());
            }
        }
    }
    out
}

/// The client's `x-request-id` when it is sane, else a new one.
pub fn request_id(headers: &HeaderMap, ids: &mut babelgate_core::IdGen) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(String::from)
        .unwrap_or_else(|| ids.next("req"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_only_exactly() {
        let keys = Keys(vec!["alpha-key".into(), "beta".into()]);
        assert!(accepts(&keys, "alpha-key"));
        assert!(accepts(&keys, "beta"));
        for wrong in ["alpha", "alpha-keyy", "", "bet", "BETA"] {
            assert!(!accepts(&keys, wrong), "{wrong}");
        }
    }

    #[test]
    fn request_ids_are_kept_when_sane() {
        let mut ids = babelgate_core::IdGen::sequential();
        let mut h = HeaderMap::new();
        h.insert("x-request-id", HeaderValue::from_static("abc-123"));
        assert_eq!(request_id(&h, &mut ids), "abc-123");
        h.insert("x-request-id", HeaderValue::from_static("has space"));
        assert_eq!(request_id(&h, &mut ids), "req-1");
    }
}
