//! Who may use a route and what crosses it: bearer keys and JWTs, CORS for browser
//! clients, the header allowlist towards the upstream, request ids.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation};
use sha2::{Digest, Sha256};

use crate::config::{Auth, Config, Cors, Jwt, JwtKeys, Keys, Route};
use crate::error::{Body, GatewayError};

/// Who made a request, as far as the route knows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Caller {
    /// A stable digest of the credential (`key:<hex>` for a static key,
    /// `jwt:<hex>` for a JWT subject): not secret, safe to log and to use
    /// in store keys. Empty on a route without auth.
    pub owner: String,
}

impl Caller {
    /// Nobody in particular: a route without auth.
    pub fn anonymous() -> Caller {
        Caller::default()
    }

    pub fn is_anonymous(&self) -> bool {
        self.owner.is_empty()
    }

    /// The store id of a conversation this caller names `id`: on a route with
    /// auth, a run or history belongs to the credential that started it, so
    /// another credential naming the same id finds nothing. The owner digest
    /// is fixed-length hex, so no two (owner, id) pairs give one key.
    pub fn scoped(&self, id: &str) -> String {
        if self.is_anonymous() {
            id.to_string()
        } else {
            format!("{}/{id}", self.owner)
        }
    }

    fn digest(kind: &str, secret: &[u8]) -> Caller {
        let mut h = Sha256::new();
        h.update(kind.as_bytes());
        h.update([0]);
        h.update(secret);
        let d = h.finalize();
        let mut owner = String::with_capacity(kind.len() + 33);
        owner.push_str(kind);
        owner.push(':');
        // 128 bits: collisions are out of reach, and the digest of a key
        // tells nothing about it.
        for b in d.iter().take(16) {
            owner.push_str(&format!("{b:02x}"));
        }
        Caller { owner }
    }
}

fn unauthorized(message: &str) -> GatewayError {
    GatewayError::client(StatusCode::UNAUTHORIZED, "unauthorized", message)
}

/// Checks `authorization: Bearer <credential>` against the route's static
/// keys and JWT settings; the caller it names on success.
pub async fn authorize(route: &Route, headers: &HeaderMap) -> Result<Caller, GatewayError> {
    authorize_with(route.auth.as_ref(), headers).await
}

/// [`authorize`] against any auth settings (the inspector's, say): without
/// any, everyone is the anonymous caller.
pub async fn authorize_with(
    auth: Option<&Auth>,
    headers: &HeaderMap,
) -> Result<Caller, GatewayError> {
    let Some(auth) = auth else {
        return Ok(Caller::anonymous());
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, key) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| key.trim())
        });
    let Some(token) = presented.filter(|t| !t.is_empty()) else {
        return Err(unauthorized(
            "this route needs `authorization: Bearer <credential>`",
        ));
    };
    authenticate(auth, token).await
}

async fn authenticate(auth: &Auth, token: &str) -> Result<Caller, GatewayError> {
    if accepts(&auth.keys, token) {
        return Ok(Caller::digest("key", token.as_bytes()));
    }
    match &auth.jwt {
        // The reason names a check, never the token.
        Some(jwt) => verify_jwt(jwt, token)
            .await
            .map_err(|why| unauthorized(&format!("the bearer token is not accepted: {why}"))),
        None => Err(unauthorized("the bearer key is not accepted on this route")),
    }
}

#[derive(serde::Deserialize)]
struct Claims {
    sub: String,
}

/// The caller a valid token names, or why it is refused.
async fn verify_jwt(jwt: &Jwt, token: &str) -> Result<Caller, &'static str> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| "not a JWT with a known `alg`")?;
    if !jwt.algorithms.contains(&header.alg) {
        return Err("its `alg` is not accepted here");
    }
    let mut validation = Validation::new(header.alg);
    validation.algorithms = vec![header.alg];
    validation.set_issuer(&[&jwt.issuer]);
    validation.set_audience(&[&jwt.audience]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.validate_nbf = true;
    validation.leeway = jwt.leeway.as_secs();
    let check = |key: &DecodingKey| {
        jsonwebtoken::decode::<Claims>(token, key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            match e.kind() {
                K::ExpiredSignature => "expired",
                K::ImmatureSignature => "not valid yet (`nbf`)",
                K::InvalidIssuer => "wrong issuer",
                K::InvalidAudience => "wrong audience",
                K::MissingRequiredClaim(_) => "a required claim (exp, iss, aud, sub) is missing",
                K::InvalidSignature => "bad signature",
                K::InvalidAlgorithm => "its `alg` does not fit the key",
                _ => "malformed",
            }
        })
    };
    let claims = match &jwt.keys {
        JwtKeys::Hs256(secret) => check(&DecodingKey::from_secret(secret))?,
        JwtKeys::Jwks(set) => check_with_set(set, &header, check)?,
        JwtKeys::JwksUrl(cache) => {
            let set = cache.keys(header.kid.as_deref()).await?;
            check_with_set(&set, &header, check)?
        }
    };
    let sub = claims.claims.sub;
    if sub.is_empty() {
        return Err("empty `sub`");
    }
    Ok(Caller::digest("jwt", sub.as_bytes()))
}

/// Tries the keys the token may be signed with: the one its `kid` names,
/// or without a `kid` every key that fits its `alg`.
fn check_with_set<T>(
    set: &JwkSet,
    header: &jsonwebtoken::Header,
    check: impl Fn(&DecodingKey) -> Result<T, &'static str>,
) -> Result<T, &'static str> {
    let mut last = Err("no key in the JWKS fits the token");
    for jwk in &set.keys {
        if header.kid.is_some() && jwk.common.key_id != header.kid {
            continue;
        }
        // A key that names its algorithm is used with that one only.
        if let Some(ka) = &jwk.common.key_algorithm {
            if format!("{ka:?}") != format!("{:?}", header.alg) {
                continue;
            }
        }
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        match check(&key) {
            Ok(v) => return Ok(v),
            Err(e) => last = Err(e),
        }
    }
    last
}

/// The JWKS of a `jwks_url`: fetched on first use, again when it is older
/// than [`JwksCache::MAX_AGE`] or a token names a `kid` it lacks, but never
/// more often than [`JwksCache::MIN_INTERVAL`]; a failed fetch keeps the
/// keys already known. Each fetch is bounded in time and size.
pub struct JwksCache {
    url: reqwest::Url,
    client: reqwest::Client,
    state: tokio::sync::Mutex<JwksState>,
}

#[derive(Default)]
struct JwksState {
    keys: Option<Arc<JwkSet>>,
    fetched: Option<Instant>,
    tried: Option<Instant>,
}

impl JwksCache {
    pub const MIN_INTERVAL: Duration = Duration::from_secs(10);
    pub const MAX_AGE: Duration = Duration::from_secs(600);
    const TIMEOUT: Duration = Duration::from_secs(5);
    const MAX_BYTES: usize = 256 * 1024;

    pub fn new(url: reqwest::Url) -> JwksCache {
        let client = reqwest::Client::builder()
            .connect_timeout(Self::TIMEOUT)
            .timeout(Self::TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        JwksCache {
            url,
            client,
            state: tokio::sync::Mutex::new(JwksState::default()),
        }
    }

    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    async fn keys(&self, kid: Option<&str>) -> Result<Arc<JwkSet>, &'static str> {
        // One fetch at a time; the others wait for it (at most TIMEOUT).
        let mut st = self.state.lock().await;
        let stale = st.fetched.is_none_or(|t| t.elapsed() >= Self::MAX_AGE);
        let unknown_kid = match (&st.keys, kid) {
            (Some(set), Some(kid)) => set.find(kid).is_none(),
            _ => false,
        };
        let may_try = st.tried.is_none_or(|t| t.elapsed() >= Self::MIN_INTERVAL);
        if (stale || unknown_kid) && may_try {
            st.tried = Some(Instant::now());
            match self.fetch().await {
                Ok(set) => {
                    st.keys = Some(Arc::new(set));
                    st.fetched = Some(Instant::now());
                }
                Err(e) => tracing::warn!(url = %self.url, error = %e, "could not fetch the JWKS"),
            }
        }
        st.keys
            .clone()
            .ok_or("the keys to check it are not available")
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        let mut resp = self
            .client
            .get(self.url.clone())
            .send()
            .await
            .map_err(|e| e.without_url().to_string())?;
        if !resp.status().is_success() {
            return Err(format!("answered {}", resp.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| e.without_url().to_string())?
        {
            if body.len() + chunk.len() > Self::MAX_BYTES {
                return Err(format!("larger than {} bytes", Self::MAX_BYTES));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("not a JWKS: {e}"))
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

/// Where a browser request comes from, by its `Origin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// No `Origin`: not a browser's cross-origin or upgrade request.
    Absent,
    /// The gateway's own origin, by a name that can be believed.
    Own,
    /// One the route's `[routes.cors]` allows.
    Allowed,
    /// `Origin` names the `Host`, but on a route without auth whose `Host`
    /// is not this machine's: what a page that rebound its own name to the
    /// gateway's address sends (see [`crate::host`]). A route with auth asks
    /// for the credential such a page does not have.
    Rebound,
    /// Another origin.
    Foreign,
}

/// The route's view of the request's `Origin`.
pub fn origin<B>(route: &Route, req: &http::Request<B>) -> Origin {
    let headers = req.headers();
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return Origin::Absent;
    };
    if route
        .cors
        .as_ref()
        .is_some_and(|c| allowed_origin(c, headers).is_some())
    {
        return Origin::Allowed;
    }
    let host = crate::host::authority(req);
    match (crate::host::origin_authority(origin), host) {
        (Some(a), Some(host)) if host.eq_ignore_ascii_case(a) => {
            if route.auth.is_some() || crate::host::is_local(&host, &[]) {
                Origin::Own
            } else {
                Origin::Rebound
            }
        }
        _ => Origin::Foreign,
    }
}

/// Authentication as a layer of a route's stack (see `server/stack.rs`):
/// the caller [`authorize`] names, and a rebound page refused, before
/// anything else of the route runs; the caller goes on as the request's
/// [`Caller`] extension (limits and the run's keys read it).
#[derive(Clone)]
pub struct AuthLayer {
    route: Arc<Route>,
}

impl AuthLayer {
    pub fn new(route: Arc<Route>) -> Self {
        AuthLayer { route }
    }
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = Authenticated<S>;

    fn layer(&self, inner: S) -> Authenticated<S> {
        Authenticated {
            inner,
            route: self.route.clone(),
        }
    }
}

/// The service [`AuthLayer`] makes.
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    route: Arc<Route>,
}

type AuthFuture<T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, GatewayError>> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for Authenticated<S>
where
    S: tower::Service<http::Request<B>, Error = GatewayError> + Clone + Send + 'static,
    S::Future: Send,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = GatewayError;
    type Future = AuthFuture<S::Response>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), GatewayError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        // The service polled ready is the one to call; a clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let route = self.route.clone();
        Box::pin(async move {
            let caller = authorize(&route, req.headers()).await?;
            refuse_rebound(&route, &req)?;
            req.extensions_mut().insert(caller);
            inner.call(req).await
        })
    }
}

/// Refuses a request from a rebound page ([`Origin::Rebound`]): 403
/// `origin_not_allowed`. Other origins are CORS's to judge.
pub fn refuse_rebound<B>(route: &Route, req: &http::Request<B>) -> Result<(), GatewayError> {
    if origin(route, req) == Origin::Rebound {
        return Err(GatewayError::client(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "this route has no auth and answers pages of its own origin only by a loopback name or `localhost` (list others in `[routes.cors]`)",
        ));
    }
    Ok(())
}

/// Adds the CORS response headers for an allowed origin: the route's policy
/// for its answers; for an error answer the route's policy does not cover
/// (an unknown path, a refusal before any route), that of any route allowing
/// the origin, so the page reads the error instead of a CORS failure.
pub fn decorate(
    config: &Config,
    route: Option<&Route>,
    req_headers: &HeaderMap,
    resp: &mut Response<Body>,
) {
    let own = route
        .and_then(|r| r.cors.as_ref())
        .filter(|c| allowed_origin(c, req_headers).is_some());
    let cors = match own {
        Some(c) => Some(c.clone()),
        None if resp.status().is_client_error() || resp.status().is_server_error() => {
            any_route(config, req_headers)
        }
        None => None,
    };
    if let Some(cors) = cors {
        allow(&cors, req_headers, resp);
    }
}

/// The response headers that let the request's origin read `resp`, when
/// `cors` allows it.
fn allow(cors: &Cors, req_headers: &HeaderMap, resp: &mut Response<Body>) {
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
    if cors.allow_credentials {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        );
    }
}

/// The policies of every route that allows the request's origin, as one:
/// credentials when one of them allows them, the union of their headers.
fn any_route(config: &Config, req_headers: &HeaderMap) -> Option<Cors> {
    let mut out: Option<Cors> = None;
    for c in config.routes.iter().filter_map(|r| r.cors.as_ref()) {
        if allowed_origin(c, req_headers).is_none() {
            continue;
        }
        let o = out.get_or_insert_with(|| Cors {
            allow_origins: Vec::new(),
            allow_headers: Vec::new(),
            max_age: c.max_age,
            allow_credentials: false,
        });
        o.allow_origins.extend(c.allow_origins.iter().cloned());
        for h in &c.allow_headers {
            if !o.allow_headers.contains(h) {
                o.allow_headers.push(h.clone());
            }
        }
        o.max_age = o.max_age.min(c.max_age);
        // `*` never comes with credentials (`check` refuses it), so a
        // wildcard route cannot lend credentials to an origin.
        o.allow_credentials |= c.allow_credentials;
    }
    out
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
    preflight_with(cors, req_headers)
}

/// A preflight for a path no route serves, from an origin some route allows:
/// allowed, so the request that follows gets its 404 readable.
pub fn preflight_unrouted(config: &Config, req_headers: &HeaderMap) -> Option<Response<Body>> {
    let cors = any_route(config, req_headers)?;
    let mut resp = preflight_with(&cors, req_headers).ok()?;
    // `decorate` lends a policy to errors only; this answer is not one.
    allow(&cors, req_headers, &mut resp);
    Some(resp)
}

fn preflight_with(cors: &Cors, req_headers: &HeaderMap) -> Result<Response<Body>, GatewayError> {
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

    #[tokio::test]
    async fn each_credential_is_its_own_owner_and_scopes_its_ids() {
        let auth = Auth {
            keys: Keys(vec!["alpha-key".into(), "beta-key".into()]),
            jwt: None,
        };
        let a = authenticate(&auth, "alpha-key").await.unwrap();
        let a2 = authenticate(&auth, "alpha-key").await.unwrap();
        let b = authenticate(&auth, "beta-key").await.unwrap();
        assert_eq!(a, a2, "stable across requests");
        assert_ne!(a, b);
        assert!(a.owner.starts_with("key:") && a.owner.len() == 4 + 32);
        assert!(
            !a.owner.contains("alpha"),
            "the owner is a digest, not the key"
        );
        assert_ne!(a.scoped("t1"), b.scoped("t1"));
        assert_eq!(Caller::anonymous().scoped("t1"), "t1");
        let e = authenticate(&auth, "gamma-key").await.unwrap_err();
        assert_eq!(e.status, StatusCode::UNAUTHORIZED);
        assert!(!e.message.contains("gamma"), "{}", e.message);
    }

    #[tokio::test]
    async fn a_jwt_subject_is_the_owner() {
        let secret = b"unit-test-secret";
        let auth = Auth {
            keys: Keys::default(),
            jwt: Some(Jwt {
                issuer: "iss".into(),
                audience: "aud".into(),
                keys: JwtKeys::Hs256(crate::config::Redacted(secret.to_vec())),
                leeway: Duration::from_secs(0),
                algorithms: vec![jsonwebtoken::Algorithm::HS256],
            }),
        };
        let exp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 60;
        let token = |sub: &str| {
            jsonwebtoken::encode(
                &jsonwebtoken::Header::default(),
                &serde_json::json!({"iss": "iss", "aud": "aud", "sub": sub, "exp": exp}),
                &jsonwebtoken::EncodingKey::from_secret(secret),
            )
            .unwrap()
        };
        let alice = authenticate(&auth, &token("alice")).await.unwrap();
        assert_eq!(alice, authenticate(&auth, &token("alice")).await.unwrap());
        assert_ne!(alice, authenticate(&auth, &token("bob")).await.unwrap());
        assert!(alice.owner.starts_with("jwt:"));
        // A static key equal to a sub is a different owner.
        assert_ne!(alice, Caller::digest("key", b"alice"));
    }
}
