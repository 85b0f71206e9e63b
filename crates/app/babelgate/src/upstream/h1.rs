//! The gateway's own HTTP/1.1 client, for plain-HTTP upstreams: one POST
//! per connection, its response body read by the stream's pump straight
//! from the socket (see [`super::body`]).
//!
//! Why not reqwest here: its connection runs as a task of its own, with a
//! request channel, read and write buffers and a body channel per stream,
//! about 30 KiB and one more wake-up per upstream read. An SSE response
//! needs none of that. Upstreams reached over TLS or a proxy keep reqwest.
//!
//! The HTTP/1.1 rules (heads, framing, the chunked coding) are
//! [`babelgate_http1`]'s, with its limits; here is only the socket. The
//! connect time is the route's; the time to the head is bounded by the
//! caller (the route's `response_timeout`).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use babelgate_http1::{HeadError, ResponseReader};
use bytes::BytesMut;
use http::{HeaderMap, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::body::{Body, READ_SIZE};

/// Why a request got no response head.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the upstream URL has no host")]
    NoHost,
    #[error("resolving {host}: {source}")]
    Resolve { host: String, source: io::Error },
    #[error("{host} resolved to no address")]
    NoAddress { host: String },
    #[error("connecting to {addr}: {source}")]
    Connect { addr: SocketAddr, source: io::Error },
    #[error("connecting took over {} ms", .0.as_millis())]
    ConnectTimeout(Duration),
    #[error("writing the request: {0}")]
    Write(io::Error),
    #[error("reading the response head: {0}")]
    Read(io::Error),
    #[error("the upstream closed the connection before its response head")]
    Closed,
    #[error("invalid response head: {0}")]
    Head(#[from] HeadError),
}

impl Error {
    /// Whether the upstream was too slow (rather than unreachable or wrong).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::ConnectTimeout(_))
    }
}

/// A response whose head has been read.
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Body,
}

/// The client of one route.
#[derive(Debug, Clone)]
pub struct Client {
    connect_timeout: Duration,
}

impl Client {
    pub fn new(connect_timeout: Duration) -> Client {
        Client { connect_timeout }
    }

    /// POSTs `body` to `url` (an `http` URL) with `headers` and reads the
    /// response head.
    pub async fn post(
        &self,
        url: &url::Url,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Response, Error> {
        let mut io = tokio::time::timeout(self.connect_timeout, connect(url))
            .await
            .map_err(|_| Error::ConnectTimeout(self.connect_timeout))??;
        io.write_all(&request(url, headers, body))
            .await
            .map_err(Error::Write)?;
        read_head(io).await
    }
}

async fn connect(url: &url::Url) -> Result<TcpStream, Error> {
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs: Vec<SocketAddr> = match url.host().ok_or(Error::NoHost)? {
        url::Host::Ipv4(ip) => vec![(ip, port).into()],
        url::Host::Ipv6(ip) => vec![(ip, port).into()],
        url::Host::Domain(host) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|source| Error::Resolve {
                host: host.to_string(),
                source,
            })?
            .collect(),
    };
    // Each address in turn, as the resolver ordered them.
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(io) => {
                // Events go as they come: no Nagle delay on the request.
                let _ = io.set_nodelay(true);
                return Ok(io);
            }
            Err(source) => last = Some(Error::Connect { addr, source }),
        }
    }
    Err(last.unwrap_or_else(|| Error::NoAddress {
        host: url.host_str().unwrap_or_default().to_string(),
    }))
}

/// The request's bytes: head and body in one write.
fn request(url: &url::Url, headers: &HeaderMap, body: &[u8]) -> Vec<u8> {
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let host = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    babelgate_http1::request_bytes(&target, &host, headers, body)
}

/// Reads the response head (interim responses skipped).
async fn read_head(mut io: TcpStream) -> Result<Response, Error> {
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    let mut reader = ResponseReader::default();
    loop {
        if let Some((head, length)) = reader.read(&mut buf)? {
            return Ok(Response {
                status: head.status,
                headers: head.headers,
                body: Body::new(io, buf, length),
            });
        }
        if buf.capacity() - buf.len() < READ_SIZE / 2 {
            buf.reserve(buf.len().max(READ_SIZE));
        }
        if io.read_buf(&mut buf).await.map_err(Error::Read)? == 0 {
            return Err(reader.at_close(&buf).map_or(Error::Closed, Error::from));
        }
    }
}

#[cfg(test)]
mod tests;
