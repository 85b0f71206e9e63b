//! The config compiler's `[routes.auth]`: bearer keys and JWTs (issuer,
//! audience, keys from a file or a JWKS, algorithms), every error with its
//! place, as the rest of the compiler (`compile.rs`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use toml::Spanned;

use super::compile::Collector;
use super::raw::*;
use super::*;

impl Collector<'_> {
    /// `a`: where table-level problems are reported.
    pub(super) fn auth(
        &mut self,
        a: &Spanned<String>,
        raw: &RawAuth,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Auth {
        let errors_before = self.errors.len();
        let mut keys = Vec::new();
        for name in &raw.bearer_env {
            match env(name.get_ref()).map(|k| k.trim().to_string()) {
                Some(k) if !k.is_empty() => keys.push(k),
                _ => self.at(
                    name,
                    format!(
                        "routes.auth.bearer_env: environment variable `{}` is not set or empty",
                        name.get_ref()
                    ),
                ),
            }
        }
        for f in &raw.bearer_files {
            let p = base.join(f.get_ref());
            match std::fs::read_to_string(&p) {
                // One key per line; blank lines and `#` comments ignored.
                Ok(text) => keys.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty() && !l.starts_with('#'))
                        .map(String::from),
                ),
                Err(e) => self.at(
                    f,
                    format!("routes.auth.bearer_files: `{}`: {e}", p.display()),
                ),
            }
        }
        let jwt = raw.jwt.as_ref().and_then(|j| self.jwt(a, j, base, env));
        if keys.is_empty() && raw.jwt.is_none() && self.errors.len() == errors_before {
            self.at(
                a,
                "routes.auth: no keys (name `bearer_env` variables or `bearer_files`, or add `[routes.auth.jwt]`)",
            );
        }
        Auth {
            keys: Keys(keys),
            jwt,
        }
    }

    /// `routes.auth.jwt`'s one key source: an HMAC secret from the
    /// environment, a JWKS file or a JWKS URL.
    fn jwt_keys(
        &mut self,
        raw: &RawJwt,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<JwtKeys> {
        if let Some(name) = &raw.hs256_secret_env {
            match env(name.get_ref()) {
                Some(secret) if !secret.is_empty() => {
                    Some(JwtKeys::Hs256(Redacted(secret.into_bytes())))
                }
                // The name is printed, never the value.
                _ => {
                    self.at(
                        name,
                        format!(
                            "routes.auth.jwt.hs256_secret_env: environment variable `{}` is not set or empty",
                            name.get_ref()
                        ),
                    );
                    None
                }
            }
        } else if let Some(f) = &raw.jwks_file {
            let p = base.join(f.get_ref());
            let parsed = std::fs::read_to_string(&p)
                .map_err(|e| e.to_string())
                .and_then(|text| {
                    serde_json::from_str::<jsonwebtoken::jwk::JwkSet>(&text)
                        .map_err(|e| format!("not a JWKS: {e}"))
                });
            match parsed {
                Ok(set) if set.keys.is_empty() => {
                    self.at(
                        f,
                        format!("routes.auth.jwt.jwks_file: `{}` holds no keys", p.display()),
                    );
                    None
                }
                Ok(set) => Some(JwtKeys::Jwks(Arc::new(set))),
                Err(e) => {
                    self.at(
                        f,
                        format!("routes.auth.jwt.jwks_file: `{}`: {e}", p.display()),
                    );
                    None
                }
            }
        } else if let Some(u) = &raw.jwks_url {
            match reqwest::Url::parse(u.get_ref()) {
                Ok(url) if url.scheme() == "https" || url.scheme() == "http" => {
                    if !url.username().is_empty() || url.password().is_some() {
                        self.at(
                            u,
                            "routes.auth.jwt.jwks_url: credentials in the URL are not supported",
                        );
                        None
                    } else {
                        Some(JwtKeys::JwksUrl(Arc::new(crate::access::JwksCache::new(
                            url,
                        ))))
                    }
                }
                Ok(url) => {
                    self.at(
                        u,
                        format!(
                            "routes.auth.jwt.jwks_url: scheme `{}` is not http or https",
                            url.scheme()
                        ),
                    );
                    None
                }
                Err(e) => {
                    self.at(u, format!("routes.auth.jwt.jwks_url: {e}"));
                    None
                }
            }
        } else {
            None
        }
    }

    pub(super) fn jwt(
        &mut self,
        j: &Spanned<String>,
        raw: &RawJwt,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<Jwt> {
        use jsonwebtoken::Algorithm;
        let required = |c: &mut Self, v: &Option<Spanned<String>>, key: &str| match v {
            Some(v) if !v.get_ref().trim().is_empty() => Some(v.get_ref().clone()),
            Some(v) => {
                c.at(v, format!("routes.auth.jwt.{key}: must not be empty"));
                None
            }
            None => {
                c.at(j, format!("routes.auth.jwt: `{key}` is required"));
                None
            }
        };
        let issuer = required(self, &raw.issuer, "issuer");
        let audience = required(self, &raw.audience, "audience");
        let sources = [&raw.hs256_secret_env, &raw.jwks_file, &raw.jwks_url]
            .iter()
            .filter(|s| s.is_some())
            .count();
        if sources != 1 {
            self.at(
                j,
                "routes.auth.jwt: give exactly one of `hs256_secret_env`, `jwks_file`, `jwks_url`",
            );
            return None;
        }
        let keys = self.jwt_keys(raw, base, env);
        let hmac = raw.hs256_secret_env.is_some();
        let algorithms: Vec<Algorithm> = match &raw.algorithms {
            None if hmac => vec![Algorithm::HS256],
            None => vec![Algorithm::RS256, Algorithm::ES256],
            Some(list) => {
                let mut out = Vec::new();
                for a in list {
                    let name = a.get_ref();
                    let parsed = name.parse::<Algorithm>().ok().filter(|alg| {
                        // An HMAC secret takes only HS256, a JWKS only public-key
                        // algorithms: a token never picks how it is checked.
                        if hmac {
                            *alg == Algorithm::HS256
                        } else {
                            !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
                        }
                    });
                    match parsed {
                        Some(alg) => out.push(alg),
                        None => self.at(
                            a,
                            if hmac {
                                format!("routes.auth.jwt.algorithms: `{name}`: with `hs256_secret_env` only HS256")
                            } else {
                                format!("routes.auth.jwt.algorithms: `{name}` is not a public-key algorithm (RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA)")
                            },
                        ),
                    }
                }
                if list.is_empty() {
                    self.at(j, "routes.auth.jwt.algorithms: empty");
                }
                out
            }
        };
        Some(Jwt {
            issuer: issuer?,
            audience: audience?,
            keys: keys?,
            leeway: Duration::from_secs(raw.leeway_s.unwrap_or(30)),
            algorithms,
        })
    }
}
