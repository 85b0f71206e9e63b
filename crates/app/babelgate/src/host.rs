//! What a request says about where it comes from and what it is addressed
//! to (`Host`, HTTP/2's `:authority`, `Forwarded`), and when that can be
//! believed.
//!
//! A surface trusted because only this machine can reach it (the inspector
//! without auth) is not protected by the peer address alone: through DNS
//! rebinding a web page on `attacker.example` reaches `127.0.0.1` with its
//! browser, from a loopback address, with `Host: attacker.example`. Browsers
//! always send the name they resolved, so a request whose `Host` is a
//! loopback address or `localhost` (or a name the operator lists) cannot come
//! from a rebound page. The rule is here, once, for every such surface.

use std::net::{IpAddr, SocketAddr};

use http::{header, HeaderMap, Request, StatusCode, Uri, Version};

use crate::error::GatewayError;

/// The authority the request names: HTTP/2's `:authority` (which hyper puts
/// in the URI), else its one `Host` header.
pub fn authority<B>(req: &Request<B>) -> Option<String> {
    if let Some(a) = req.uri().authority() {
        return Some(a.as_str().to_string());
    }
    only_host(req.headers()).map(String::from)
}

/// The value of the request's one `Host` header, if it has exactly one.
fn only_host(h: &HeaderMap) -> Option<&str> {
    let mut all = h.get_all(header::HOST).iter();
    let first = all.next()?;
    if all.next().is_some() {
        return None;
    }
    first.to_str().ok()
}

/// The host part of an authority (`name`, `1.2.3.4`, `[::1]`), port dropped,
/// lower case, without a trailing dot; `None` when it is not an authority.
fn host_of(authority: &str) -> Option<String> {
    let a = authority.parse::<http::uri::Authority>().ok()?;
    if a.as_str().contains('@') {
        return None;
    }
    let host = a.host().trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

fn loopback_ip(ip: IpAddr) -> bool {
    ip.is_loopback()
        || matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()))
}

/// Whether `authority` names this machine: a loopback address, `localhost`,
/// or one of `allowed` (names, compared without the port and case).
pub fn is_local(authority: &str, allowed: &[String]) -> bool {
    let Some(host) = host_of(authority) else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<IpAddr>().is_ok_and(loopback_ip) || host == "localhost" {
        return true;
    }
    allowed
        .iter()
        .any(|a| a.trim_end_matches('.').eq_ignore_ascii_case(&host))
}

/// The gate of a loopback-trusted surface: the peer is on the loopback
/// interface and the request names this machine (see the module doc).
/// `what` names the surface in the 403's message.
pub fn loopback_only(
    peer: SocketAddr,
    headers: &HeaderMap,
    authority: Option<&str>,
    allowed: &[String],
    what: &str,
) -> Result<(), GatewayError> {
    if !loopback_ip(peer.ip()) {
        return Err(GatewayError::client(
            StatusCode::FORBIDDEN,
            "loopback_only",
            format!("{what} answers loopback clients only"),
        ));
    }
    // A proxy on this machine makes every caller loopback; one that says
    // so is believed: its callers are not local.
    let proxied = ["forwarded", "x-forwarded-for", "x-real-ip"]
        .iter()
        .any(|h| headers.contains_key(*h));
    if proxied {
        return Err(GatewayError::client(
            StatusCode::FORBIDDEN,
            "loopback_only",
            format!("{what} does not answer through a proxy"),
        ));
    }
    if !authority.is_some_and(|a| is_local(a, allowed)) {
        return Err(GatewayError::client(
            StatusCode::FORBIDDEN,
            "host_not_allowed",
            format!(
                "{what} answers only requests whose Host is a loopback address, `localhost` or a listed name"
            ),
        ));
    }
    Ok(())
}

/// The client's address as the gateway counts it (a request extension, set
/// where the request comes in): the peer, or the client a trusted proxy
/// names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// The client behind `peer`: the peer itself unless it is one of `trusted`
/// (`[server] trusted_proxies`); then the nearest hop of `Forwarded` (else
/// `X-Forwarded-For`) that is not a trusted proxy, read from the right (each
/// proxy appends the address it saw, so only what trusted proxies wrote is
/// believed; what the client wrote further left is not). A value that does
/// not parse stops the walk at the last hop believed.
pub fn client_addr(peer: SocketAddr, headers: &HeaderMap, trusted: &[ipnet::IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| n.contains(ip));
    let mut client = canonical(peer.ip());
    if !is_trusted(&client) {
        return client;
    }
    let forwarded = headers.contains_key(header::FORWARDED);
    let hops: Vec<&str> = if forwarded {
        headers
            .get_all(header::FORWARDED)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|element| {
                element
                    .split(';')
                    .find_map(|pair| {
                        let (k, v) = pair.split_once('=')?;
                        k.trim().eq_ignore_ascii_case("for").then_some(v.trim())
                    })
                    .unwrap_or("")
            })
            .collect()
    } else {
        headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect()
    };
    for hop in hops.iter().rev() {
        let Some(ip) = hop_ip(hop) else { break };
        client = ip;
        if !is_trusted(&client) {
            break;
        }
    }
    client
}

/// The origin (`scheme://authority`) the client addressed: its `Host` (or
/// `:authority`) and the listener's scheme; from a peer in `trusted`
/// (`[server] trusted_proxies`), what the nearest proxy says it was asked
/// (`Forwarded`'s `host` and `proto`, else `X-Forwarded-Host` and
/// `X-Forwarded-Proto`, their last values: the ones it wrote). What anyone
/// else says of it is not believed. `None`: no authority to name.
pub fn origin<B>(
    req: &Request<B>,
    peer: SocketAddr,
    trusted: &[ipnet::IpNet],
    tls: bool,
) -> Option<String> {
    let mut scheme = if tls { "https" } else { "http" }.to_string();
    let mut authority = authority(req);
    if trusted.iter().any(|n| n.contains(&canonical(peer.ip()))) {
        let h = req.headers();
        let last = |name: &str| {
            h.get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(|v| v.trim().trim_matches('"'))
                .rfind(|v| !v.is_empty())
                .map(str::to_string)
        };
        let forwarded = last(header::FORWARDED.as_str());
        let pair = |key: &str| {
            forwarded.as_deref().and_then(|element| {
                element.split(';').find_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    k.trim()
                        .eq_ignore_ascii_case(key)
                        .then(|| v.trim().trim_matches('"').to_string())
                })
            })
        };
        if let Some(p) = pair("proto").or_else(|| last("x-forwarded-proto")) {
            scheme = p.to_ascii_lowercase();
        }
        if let Some(host) = pair("host").or_else(|| last("x-forwarded-host")) {
            authority = Some(host);
        }
    }
    let authority = authority.filter(|a| host_of(a).is_some())?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    Some(format!("{scheme}://{authority}"))
}

/// An IPv4 client reached over an IPv6 socket is the same IPv4 client.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The address of one hop: `1.2.3.4`, `1.2.3.4:5`, `[::1]:5`, `::1`, or
/// `Forwarded`'s quoted forms (`"[::1]:5"`).
fn hop_ip(hop: &str) -> Option<IpAddr> {
    let h = hop.trim().trim_matches('"');
    if let Ok(ip) = h.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    if let Ok(sa) = h.parse::<SocketAddr>() {
        return Some(canonical(sa.ip()));
    }
    h.strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .and_then(|(ip, _)| ip.parse::<IpAddr>().ok())
        .map(canonical)
}

/// RFC 9112 section 3.2: an HTTP/1.1 request without `Host`, and any
/// HTTP/1 request with two or with one that is not an authority, is
/// answered 400. Checked where requests come off the wire (hyper does not).
pub fn check_http1<B>(req: &Request<B>) -> Result<(), GatewayError> {
    if req.version() >= Version::HTTP_2 {
        return Ok(());
    }
    let count = req.headers().get_all(header::HOST).iter().count();
    let bad = |why: &str| {
        Err(GatewayError::client(
            StatusCode::BAD_REQUEST,
            "invalid_host",
            why.to_string(),
        ))
    };
    match count {
        0 if req.version() == Version::HTTP_11 => bad("an HTTP/1.1 request needs a Host header"),
        0 => Ok(()),
        1 => {
            let v = only_host(req.headers()).unwrap_or("");
            // An absolute-form target names the authority too: they agree.
            let agrees = req
                .uri()
                .authority()
                .is_none_or(|a| Some(a.host().to_ascii_lowercase()) == host_of(v));
            if v.is_empty() || host_of(v).is_none() || !agrees {
                bad("the Host header is not a valid authority")
            } else {
                Ok(())
            }
        }
        _ => bad("a request has one Host header"),
    }
}

/// The authority of an `Origin` (`scheme://host[:port]`), if it has one.
pub fn origin_authority(origin: &str) -> Option<&str> {
    let uri = origin.parse::<Uri>().ok()?;
    uri.scheme()?;
    let (_, rest) = origin.split_once("://")?;
    // An origin is nothing but scheme and authority.
    (uri.authority()?.as_str() == rest).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The origin a route is described at: the request's own, and what a
    /// proxy says only when the peer is a trusted one.
    #[test]
    fn origin_believes_forwarded_names_only_from_trusted_proxies() {
        let req = |headers: &[(&str, &str)]| {
            let mut b = Request::builder().uri("/a2a");
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            b.body(()).unwrap()
        };
        let proxy: SocketAddr = "10.0.0.5:4000".parse().unwrap();
        let trusted: Vec<ipnet::IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let forwarded = req(&[
            ("host", "gw.internal:8080"),
            ("x-forwarded-host", "chat.example.com"),
            ("x-forwarded-proto", "https"),
        ]);
        assert_eq!(
            origin(&forwarded, proxy, &[], false).as_deref(),
            Some("http://gw.internal:8080"),
            "no trusted proxy: the Host"
        );
        assert_eq!(
            origin(&forwarded, proxy, &trusted, false).as_deref(),
            Some("https://chat.example.com")
        );
        let rfc = req(&[
            ("host", "gw.internal"),
            (
                "forwarded",
                "for=1.2.3.4;host=a.example;proto=http, for=10.0.0.9;host=b.example;proto=https",
            ),
        ]);
        assert_eq!(
            origin(&rfc, proxy, &trusted, true).as_deref(),
            Some("https://b.example"),
            "the nearest proxy's element"
        );
        assert_eq!(
            origin(&req(&[("host", "gw")]), proxy, &[], true).as_deref(),
            Some("https://gw")
        );
        let odd = req(&[("host", "gw"), ("x-forwarded-proto", "javascript")]);
        assert_eq!(origin(&odd, proxy, &trusted, false), None, "no such scheme");
        assert_eq!(origin(&req(&[]), proxy, &[], false), None, "no host");
    }

    #[test]
    fn local_names() {
        let none: [String; 0] = [];
        for a in [
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.9.9.9:1",
            "localhost",
            "LOCALHOST:8080",
            "localhost.:80",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:8080",
        ] {
            assert!(is_local(a, &none), "{a}");
        }
        for a in [
            "rebind.attacker.example:8080",
            "localhost.attacker.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:8080",
            "[::2]:80",
            "user@127.0.0.1",
            "",
            "a b",
        ] {
            assert!(!is_local(a, &none), "{a}");
        }
        let listed = ["gw.internal".to_string()];
        assert!(is_local("GW.internal:9000", &listed));
        assert!(!is_local("gw.internal.attacker.example", &listed));
    }

    #[test]
    fn the_client_behind_trusted_proxies_only() {
        let peer: SocketAddr = "10.0.0.5:4000".parse().unwrap();
        let h = |name: &str, v: &str| {
            let mut m = HeaderMap::new();
            m.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
            m
        };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let xff = h("x-forwarded-for", "1.1.1.1, 2.2.2.2, 10.0.0.9");
        // Nobody trusted: the header is the client's word, not believed.
        assert_eq!(client_addr(peer, &xff, &[]), ip("10.0.0.5"));
        let proxies: Vec<ipnet::IpNet> = vec!["10.0.0.0/24".parse().unwrap()];
        // The nearest untrusted hop; what it claims further left is not read.
        assert_eq!(client_addr(peer, &xff, &proxies), ip("2.2.2.2"));
        let fwd = h(
            "forwarded",
            "for=1.1.1.1, for=\"[2001:db8::1]:4711\";proto=https",
        );
        assert_eq!(client_addr(peer, &fwd, &proxies), ip("2001:db8::1"));
        let junk = h("x-forwarded-for", "zzz, 10.0.0.7");
        assert_eq!(client_addr(peer, &junk, &proxies), ip("10.0.0.7"));
        let far: SocketAddr = "203.0.113.1:1".parse().unwrap();
        assert_eq!(client_addr(far, &xff, &proxies), ip("203.0.113.1"));
        let mapped: SocketAddr = "[::ffff:10.0.0.5]:1".parse().unwrap();
        assert_eq!(client_addr(mapped, &xff, &proxies), ip("2.2.2.2"));
    }

    #[test]
    fn http1_host_rules() {
        let req = |v: Version, hosts: &[&str]| {
            let mut r = Request::get("/x").version(v);
            for h in hosts {
                r = r.header("host", *h);
            }
            r.body(()).unwrap()
        };
        assert!(check_http1(&req(Version::HTTP_11, &["a.example:1"])).is_ok());
        assert!(check_http1(&req(Version::HTTP_10, &[])).is_ok());
        assert!(check_http1(&req(Version::HTTP_2, &[])).is_ok());
        for bad in [
            req(Version::HTTP_11, &[]),
            req(Version::HTTP_11, &["a", "b"]),
            req(Version::HTTP_10, &["a", "a"]),
            req(Version::HTTP_11, &[""]),
            req(Version::HTTP_11, &["a b"]),
        ] {
            let e = check_http1(&bad).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
        }
    }
}
