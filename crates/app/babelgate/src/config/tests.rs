use std::path::Path;

use babelgate_core::Dialect;
use std::time::Duration;

use super::*;

const ISSUE_EXAMPLE: &str = r#"
[server]
listen = "127.0.0.1:8080"

[[routes]]
path = "/api/chat"                      # where clients POST
client = "vercel"                       # ag-ui | hai | vercel | agkit
upstream = "http://127.0.0.1:9000/agent"
upstream_protocol = "ag-ui"             # ag-ui | hai | vercel | agkit
"#;

#[test]
fn the_documented_route_shape_works_as_written() {
    let c = Config::parse(ISSUE_EXAMPLE).unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
    let r = c.route("/api/chat").unwrap();
    assert_eq!(
        (r.client, r.upstream_protocol),
        (Dialect::Vercel, Dialect::AgUi)
    );
    assert_eq!(r.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
}

#[test]
fn timeout_and_limit_keys_have_defaults_and_the_old_name_still_works() {
    let c = Config::parse(ISSUE_EXAMPLE).unwrap();
    assert_eq!(c.request_read_timeout, Duration::from_secs(10));
    assert_eq!(c.keepalive_timeout, Duration::from_secs(60));
    assert_eq!(c.max_connections, 10_000);
    let r = c.route("/api/chat").unwrap();
    assert_eq!(r.response_timeout, Duration::from_secs(60));
    assert_eq!((r.max_streams, &r.rate_limit), (0, &None));

    let src =
        "[server]\nheader_read_timeout_ms = 250\nkeepalive_timeout_ms = 40\nmax_connections = 3\n\
        [[routes]]\npath = \"/c\"\nclient = \"ag-ui\"\nupstream = \"http://127.0.0.1:1/\"\n\
        upstream_protocol = \"ag-ui\"\nresponse_timeout_ms = 70\nmax_streams = 2\n\
        [routes.rate_limit]\nrequests_per_s = 1.5\nconcurrent_streams = 4\n";
    let c = Config::parse(src).unwrap();
    assert_eq!(c.request_read_timeout, Duration::from_millis(250));
    assert_eq!(c.keepalive_timeout, Duration::from_millis(40));
    assert_eq!(c.max_connections, 3);
    let r = c.route("/c").unwrap();
    assert_eq!(r.response_timeout, Duration::from_millis(70));
    assert_eq!(r.max_streams, 2);
    assert_eq!(
        r.rate_limit,
        Some(RateLimit {
            requests_per_s: Some(1.5),
            burst: 2,
            concurrent_streams: Some(4)
        })
    );
    let both = src.replace("max_connections = 3", "request_read_timeout_ms = 90");
    assert_eq!(
        Config::parse(&both).unwrap().request_read_timeout,
        Duration::from_millis(90),
        "the new name wins over the old"
    );
    let bad = src.replace("requests_per_s = 1.5", "requests_per_s = -1.0");
    assert!(Config::parse(&bad).is_err());
}

#[test]
fn client_stall_timeout_is_30_s_unless_set_and_0_turns_it_off() {
    let c = Config::parse(ISSUE_EXAMPLE).unwrap();
    let r = c.route("/api/chat").unwrap();
    assert_eq!(r.client_stall_timeout, Some(Duration::from_secs(30)));
    let with = |v: &str| {
        let src = format!("{ISSUE_EXAMPLE}client_stall_timeout_ms = {v}\n");
        Config::parse(&src)
            .unwrap()
            .route("/api/chat")
            .unwrap()
            .client_stall_timeout
    };
    assert_eq!(with("300"), Some(Duration::from_millis(300)));
    assert_eq!(with("0"), None);
    assert!(Config::parse(&format!("{ISSUE_EXAMPLE}client_stall_timeout_ms = -1\n")).is_err());
}

/// `agent_name`, `agent_description` and `[[routes.agent_skills]]`:
/// read on a route whose client dialect describes the agent, refused
/// (at their line and column) on one whose dialect does not.
#[test]
fn agent_keys_describe_the_route_where_the_client_dialect_reads_them() {
    let a2a = ISSUE_EXAMPLE.replace("client = \"vercel\"", "client = \"a2a\"");
    let src = format!(
        "{a2a}agent_name = \"Weather\"\nagent_description = \"Says it\"\n\
         [[routes.agent_skills]]\nid = \"w\"\nname = \"Weather\"\ntags = [\"t\"]\n"
    );
    let c = Config::parse(&src).unwrap();
    let agent = &c.route("/api/chat").unwrap().agent;
    assert_eq!(agent.name, "Weather");
    assert_eq!(agent.description, "Says it");
    assert_eq!(agent.skills.len(), 1);
    assert_eq!(agent.skills[0].tags, vec!["t".to_string()]);
    // The name defaults to the path.
    let plain = Config::parse(&a2a).unwrap();
    assert_eq!(plain.route("/api/chat").unwrap().agent.name, "/api/chat");

    let errs = Config::parse(&format!("{ISSUE_EXAMPLE}agent_name = \"Weather\"\n")).unwrap_err();
    assert_eq!((errs[0].line, errs[0].column), (10, 14), "{errs:?}");
    assert!(
        errs[0].message.contains("routes.agent_name"),
        "{}",
        errs[0].message
    );

    let twice = format!(
        "{a2a}[[routes.agent_skills]]\nid = \"w\"\nname = \"A\"\n[[routes.agent_skills]]\nid = \"w\"\nname = \"B\"\n"
    );
    let errs = Config::parse(&twice).unwrap_err();
    assert_eq!(errs[0].line, 13, "{errs:?}");
    assert!(
        errs[0].message.contains("listed twice"),
        "{}",
        errs[0].message
    );
    let unnamed = format!("{a2a}[[routes.agent_skills]]\nid = \"w\"\nname = \" \"\n");
    assert!(Config::parse(&unnamed).is_err());
    let unknown = format!("{a2a}[[routes.agent_skills]]\nid = \"w\"\nname = \"A\"\nicon = 1\n");
    let errs = Config::parse(&unknown).unwrap_err();
    assert!(errs[0].message.contains("icon"), "{}", errs[0].message);
}

#[test]
fn drop_raw_is_off_unless_the_route_sets_it() {
    let c = Config::parse(ISSUE_EXAMPLE).unwrap();
    assert!(!c.route("/api/chat").unwrap().drop_raw);
    let src = format!("{ISSUE_EXAMPLE}drop_raw = true\n");
    assert!(
        Config::parse(&src)
            .unwrap()
            .route("/api/chat")
            .unwrap()
            .drop_raw
    );
}

#[test]
fn unknown_keys_are_rejected_with_their_position() {
    let errs = Config::parse("[server]\nlisten = \"127.0.0.1:1\"\nlistn = 3\n").unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].line, 3);
    assert!(errs[0].message.contains("listn"), "{}", errs[0].message);
}

#[test]
fn every_bad_value_is_reported_with_its_line() {
    let src = r#"
[[routes]]
path = "api"
client = "grpc"
upstream = "ftp://x"
upstream_protocol = "ag-ui"
"#;
    let errs = Config::parse(src).unwrap_err();
    let lines: Vec<_> = errs.iter().map(|e| e.line).collect();
    assert_eq!(lines, [3, 4, 5], "{errs:?}");
    assert!(errs[1].message.contains("unknown dialect `grpc`"));
}

#[test]
fn store_bounds_are_read_and_zero_is_refused_where_it_stands() {
    let route = "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n";
    let c = Config::parse(&format!(
        "{route}[store]\nbackend = \"memory\"\nmax_run_bytes = 1000\nmax_runs = 7\nmax_total_bytes = 5000\nmax_history_bytes = 300\nmax_total_history_bytes = 900\nmax_snapshot_bytes = 200\nmax_followers = 3\n"
    ))
    .unwrap();
    let s = &c.store;
    assert_eq!(
        (
            s.max_run_bytes,
            s.max_runs,
            s.max_total_bytes,
            s.max_history_bytes,
            s.max_total_history_bytes,
            s.max_snapshot_bytes,
            s.max_followers
        ),
        (1000, 7, 5000, 300, 900, 200, 3)
    );
    let errs = Config::parse(&format!(
        "{route}[store]\nbackend = \"memory\"\nmax_followers = 0\nmax_run_bytes = 0\n"
    ))
    .unwrap_err();
    let got: Vec<_> = errs.iter().map(|e| (e.line, e.message.as_str())).collect();
    assert_eq!(
        got,
        [
            (9, "store.max_run_bytes: must be at least 1"),
            (8, "store.max_followers: must be at least 1")
        ],
        "{errs:?}"
    );
}

#[test]
fn redis_cluster_takes_a_list_of_seed_nodes_each_interpolated_and_checked_where_it_stands() {
    let route = "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n";
    let env = |k: &str| (k == "PW").then(|| "s3cret-77".to_string());
    let parse =
        |store: &str| Config::parse_with(&format!("{route}[store]\n{store}"), Path::new("."), &env);
    let c = parse(
        "backend = \"redis-cluster\"\nurls = [\"redis://:${PW}@10.0.0.1:7000\", \"rediss://10.0.0.2:7000\"]\n",
    )
    .unwrap();
    assert_eq!(
        c.store.backend,
        Backend::RedisCluster {
            urls: vec![
                "redis://:s3cret-77@10.0.0.1:7000".into(),
                "rediss://10.0.0.2:7000".into()
            ]
        }
    );
    // Debug output (logged config) names no URL, so no password.
    assert!(!format!("{:?}", c.store).contains("s3cret-77"));
    let errs = parse(
        "backend = \"redis-cluster\"\nurls = [\n  \"redis://a:1\",\n  \"http://b:2\",\n  \"redis://${NOPE}:3\",\n]\n",
    )
    .unwrap_err();
    let got: Vec<_> = errs.iter().map(|e| (e.line, e.message.as_str())).collect();
    assert_eq!(
        got,
        [
            (10, "store.urls[1]: expected redis://host:port"),
            (11, "store.urls[2]: environment variable `NOPE` is not set"),
        ],
        "{errs:?}"
    );
    let errs = parse("backend = \"redis-cluster\"\nurls = []\n").unwrap_err();
    assert_eq!(errs[0].message, "store.urls: give at least one seed node");
    let errs = parse("backend = \"redis-cluster\"\nurl = \"redis://a:1\"\n").unwrap_err();
    assert!(errs[0]
        .message
        .starts_with("store.url: the redis-cluster backend takes `urls`"));
    let errs = parse("backend = \"redis\"\nurl = \"redis://a:1\"\nurls = [\"redis://a:1\"]\n")
        .unwrap_err();
    assert_eq!(
        (errs[0].line, errs[0].message.as_str()),
        (9, "store.urls: only the redis-cluster backend takes urls")
    );
}

#[test]
fn resume_is_on_by_default_and_can_be_turned_off_per_route() {
    let route = |path: &str, extra: &str| {
        format!("[[routes]]\npath = \"{path}\"\nclient = \"vercel\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n{extra}")
    };
    let c = Config::parse(&format!(
        "{}{}{}",
        route("/default", ""),
        route(
            "/on",
            "resume = true\non_disconnect = \"keep\"\nretention_s = 9\n"
        ),
        route("/off", "resume = false\non_disconnect = \"cancel\"\n")
    ))
    .unwrap();
    let r = |p| c.route(p).unwrap();
    assert!(r("/default").resume && r("/on").resume && !r("/off").resume);
    assert_eq!(r("/on").retention, Duration::from_secs(9));
    assert_eq!(r("/off").on_disconnect, OnDisconnect::Cancel);
}

#[test]
fn a_route_without_resume_refuses_what_needs_its_run_log_where_it_stands() {
    let base = "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n";
    let errs = Config::parse(&format!(
        "{base}resume = false\non_disconnect = \"keep\"\nretention_s = 60\n"
    ))
    .unwrap_err();
    let got: Vec<_> = errs
        .iter()
        .map(|e| (e.line, e.column, e.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (7, 17, "routes.on_disconnect: `keep` runs on for its client to resume, but this route has `resume = false` (line 6) and keeps no run log"),
            (8, 15, "routes.retention_s: this route has `resume = false` (line 6) and keeps no run log to retain"),
        ],
        "{errs:?}"
    );
    let errs = Config::parse(&format!("{base}resume = \"no\"\n")).unwrap_err();
    assert_eq!((errs.len(), errs[0].line), (1, 6), "{errs:?}");
    assert!(errs[0].message.contains("bool"), "{errs:?}");
}

#[test]
fn the_shipped_gateway_toml_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../gateway.toml");
    let c = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        c.demo_agent.is_some(),
        "the shipped file runs the demo agent"
    );
    for d in Dialect::ALL {
        assert!(
            c.routes.iter().any(|r| r.client == d),
            "a route for {d} clients"
        );
    }
}
