use super::*;

fn state() -> Arc<ConnState> {
    ConnState::new(
        Timeouts {
            read: Duration::from_secs(10),
            keepalive: Duration::from_secs(60),
        },
        Arc::default(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_new_connection_must_send_a_request_within_the_read_timeout() {
    let s = state();
    let opened = Instant::now();
    assert_eq!(
        s.deadline(),
        Some((opened + Duration::from_secs(10), Expired::Read))
    );
    tokio::time::advance(Duration::from_secs(3)).await;
    let (guard, ReadDeadline(body_by)) = s.begin(false);
    assert_eq!(
        body_by,
        opened + Duration::from_secs(10),
        "from accept, not from the head"
    );
    assert_eq!(s.deadline(), None, "busy");
    tokio::time::advance(Duration::from_secs(100)).await;
    drop(guard);
    let idle_at = Instant::now();
    assert_eq!(
        s.deadline(),
        Some((idle_at + Duration::from_secs(60), Expired::Idle))
    );
    tokio::time::advance(Duration::from_secs(5)).await;
    s.read_some(b"G");
    assert_eq!(
        s.deadline(),
        Some((Instant::now() + Duration::from_secs(10), Expired::Read)),
        "a next HTTP/1 head has 10 s from its first byte"
    );
}

/// A socket whose writes find it full until `open`.
struct Blocked {
    open: bool,
}

impl AsyncWrite for Blocked {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        b: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.open {
            true => Poll::Ready(Ok(b.len())),
            false => Poll::Pending,
        }
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn blocked(stall_ms: u64) -> (Watched<Blocked>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::default());
    let s = ConnState::new(
        Timeouts {
            read: Duration::from_secs(10),
            keepalive: Duration::from_secs(60),
        },
        metrics.clone(),
    );
    s.stall_ms.store(stall_ms, Ordering::Relaxed);
    (Watched::new(Blocked { open: false }, s), metrics)
}

#[tokio::test(start_paused = true)]
async fn a_write_that_makes_no_progress_for_the_deadline_fails_for_good() {
    use tokio::io::AsyncWriteExt;
    let (mut io, metrics) = blocked(300);
    let t0 = Instant::now();
    let early = tokio::time::timeout(Duration::from_millis(299), io.write(b"x")).await;
    assert!(early.is_err(), "still waiting before the deadline");
    let e = io.write(b"x").await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(
        t0.elapsed(),
        Duration::from_millis(300),
        "from the first blocked write"
    );
    io.io.open = true;
    assert!(io.write(b"x").await.is_err(), "given up on for good");
    assert!(metrics
        .render()
        .contains("babelgate_client_stalls_total{reason=\"socket\"} 1"));
}

#[tokio::test(start_paused = true)]
async fn progress_restarts_the_deadline_and_none_means_no_deadline() {
    use tokio::io::AsyncWriteExt;
    let (mut io, _) = blocked(300);
    let slow = tokio::time::timeout(Duration::from_millis(200), io.write(b"x")).await;
    assert!(slow.is_err());
    io.io.open = true;
    assert_eq!(io.write(b"xy").await.unwrap(), 2);
    io.io.open = false;
    let t1 = Instant::now();
    assert!(io.write(b"x").await.is_err());
    assert_eq!(t1.elapsed(), Duration::from_millis(300));

    let (mut io, metrics) = blocked(STALL_OFF);
    let w = tokio::time::timeout(Duration::from_secs(3600), io.write(b"x")).await;
    assert!(w.is_err(), "waits as long as the connection lives");
    assert!(!metrics.render().contains("client_stalls_total{"));
}

#[test]
fn the_timeout_answer_is_well_formed() {
    let text = std::str::from_utf8(TIMEOUT_ANSWER).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.contains(&format!("content-length: {}", body.len())));
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["error"]["code"], "request_timeout");
}

#[test]
fn a_partial_http2_preface_is_not_an_http1_head() {
    let s = state();
    s.read_some(b"PR");
    assert!(!s.mid_http1_head());
    let s = state();
    s.read_some(b"POST /x HTTP/1.1\r\n");
    assert!(s.mid_http1_head());
    let (g, _) = s.begin(false);
    assert!(!s.mid_http1_head(), "a whole head");
    drop(g);
    s.read_some(b"G");
    assert!(s.mid_http1_head(), "the next request's head");
}

#[tokio::test(start_paused = true)]
async fn http2_streams_do_not_shorten_the_idle_time_by_pings() {
    let s = state();
    let (g, _) = s.begin(true);
    drop(g);
    let idle_at = Instant::now();
    s.read_some(b"\0");
    assert_eq!(
        s.deadline(),
        Some((idle_at + Duration::from_secs(60), Expired::Idle))
    );
    let (_g1, _) = s.begin(true);
    let (g2, ReadDeadline(by)) = s.begin(true);
    assert_eq!(by, Instant::now() + Duration::from_secs(10));
    drop(g2);
    assert_eq!(s.deadline(), None, "one stream still open");
}

/// Gives one of `reads` per read, then the end.
struct Reads(std::collections::VecDeque<&'static [u8]>);

impl AsyncRead for Reads {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if let Some(r) = self.0.pop_front() {
            let n = r.len().min(buf.remaining());
            buf.put_slice(&r[..n]);
            if n < r.len() {
                self.0.push_front(&r[n..]);
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Reads {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        b: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(b.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

async fn read_all<T: AsyncRead + Unpin>(io: &mut T, room: usize) -> Vec<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut reads = Vec::new();
    loop {
        let mut buf = vec![0u8; room];
        let n = io.read(&mut buf).await.unwrap();
        if n == 0 {
            return reads;
        }
        buf.truncate(n);
        reads.push(buf);
    }
}

#[tokio::test]
async fn an_http1_request_is_told_from_one_read_and_given_back_whole_first() {
    let head: &[u8] = b"POST /api/chat HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\n{}";
    let mut io = Reads([head, b"next"].into());
    let (first, h2) = sniff(&mut io).await.unwrap();
    assert!(!h2);
    assert_eq!(
        &first[..],
        head,
        "what the one read brought, not 24 bytes of it"
    );
    let mut io = Prepend::new(first, io);
    assert_eq!(
        read_all(&mut io, 8192).await,
        [head.to_vec(), b"next".to_vec()]
    );
}

#[tokio::test]
async fn the_http2_preface_is_told_however_it_is_split() {
    for split in 0..=H2_PREFACE.len() {
        let (a, b) = H2_PREFACE.split_at(split);
        let mut reads: std::collections::VecDeque<&'static [u8]> = [a, b, b"\0\0\0\x04"].into();
        reads.retain(|r| !r.is_empty());
        let mut io = Reads(reads);
        let (first, h2) = sniff(&mut io).await.unwrap();
        assert!(h2, "split at {split}");
        // The preface, and what had arrived after it (hyper's now).
        assert!(first.starts_with(H2_PREFACE), "split at {split}");
    }
    // Byte by byte.
    let mut io = Reads(H2_PREFACE.chunks(1).collect());
    assert!(sniff(&mut io).await.unwrap().1);
}

#[tokio::test]
async fn a_start_like_the_preface_that_leaves_it_is_http1() {
    let mut io = Reads([&b"PRI * HTTP/2"[..], b".1\r\n"].into());
    let (first, h2) = sniff(&mut io).await.unwrap();
    assert!(!h2);
    assert_eq!(&first[..], b"PRI * HTTP/2.1\r\n");
    // A connection closed at once: nothing, HTTP/1 (hyper sees the end).
    let (first, h2) = sniff(&mut Reads([].into())).await.unwrap();
    assert!(first.is_empty() && !h2);
    // The end inside the preface: what came, not HTTP/2.
    let (first, h2) = sniff(&mut Reads([&b"PRI *"[..]].into())).await.unwrap();
    assert_eq!((&first[..], h2), (&b"PRI *"[..], false));
}

#[tokio::test]
async fn what_was_read_first_is_given_back_in_reads_of_any_size() {
    let mut io = Prepend::new(
        Bytes::from_static(b"0123456789"),
        Reads([&b"ab"[..]].into()),
    );
    let got = read_all(&mut io, 4).await;
    assert_eq!(got, [&b"0123"[..], b"4567", b"89", b"ab"]);
    assert!(io.first.is_empty());
}
