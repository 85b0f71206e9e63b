//! `babelgate`: serve routes, translate captured streams, run the demo agent.
// As in the library: nothing reachable from input may panic.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::string_slice,
        clippy::unwrap_used,
        clippy::expect_used
    )
)]
#![forbid(unsafe_code)]

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use babelgate::config::{Config, LogFormat};
use babelgate::inspector::capture::Ending;
use babelgate::inspector::ReplaySetup;
use babelgate::server::Gateway;
use babelgate::transport::{self, Transport};
use babelgate::{demo, process, registry};

/// jemalloc rather than the system's malloc: the translation path allocates
/// a few small strings per event, and `translate` runs 9% fewer instructions
/// with it (docs/benchmarks-log.md; mimalloc was faster still but held half as
/// much more memory per open stream).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
use babelgate_core::sse::DEFAULT_MAX_EVENT_BYTES;
use babelgate_core::{Dialect, EncodeContext};
use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "babelgate",
    version,
    about = "Any agent UI to any agent backend, whatever streaming dialect each speaks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the routes of a gateway.toml.
    Serve {
        #[arg(long, default_value = "gateway.toml")]
        config: PathBuf,
        /// Overrides `[server] listen`.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Log as JSON lines instead of text.
        #[arg(long)]
        log_json: bool,
    },
    /// Validate a gateway.toml and print every problem with its line.
    Check {
        #[arg(long, default_value = "gateway.toml")]
        config: PathBuf,
    },
    /// Run the built-in scripted agent in any dialect.
    DemoAgent {
        /// ag-ui, hai, vercel or agkit.
        #[arg(long)]
        protocol: Dialect,
        #[arg(long, default_value = "127.0.0.1:9000")]
        listen: SocketAddr,
        /// Pause between events, in milliseconds.
        #[arg(long, default_value_t = 15)]
        delay_ms: u64,
    },
    /// Translate a captured SSE stream from one dialect to another.
    Translate {
        /// Dialect of the input: ag-ui, hai, vercel, agkit.
        #[arg(long)]
        from: Dialect,
        /// Dialect of the output: ag-ui, hai, vercel, agkit.
        #[arg(long)]
        to: Dialect,
        /// Largest single event accepted, in bytes.
        #[arg(long, default_value_t = DEFAULT_MAX_EVENT_BYTES)]
        max_event_bytes: usize,
        /// Deterministic ids and timestamps (for comparing captures).
        #[arg(long)]
        deterministic: bool,
        /// Transport of the input: sse, or proto (AG-UI's binary
        /// transport; ag-ui and hai only).
        #[arg(long, value_enum, default_value = "sse")]
        from_transport: TransportArg,
        /// Transport of the output: sse or proto (ag-ui and hai only).
        #[arg(long, value_enum, default_value = "sse")]
        to_transport: TransportArg,
        /// A capture's setup from the inspector (`{id}.setup.json`): the
        /// ids, transports and ending of the live stream, so that its
        /// upstream capture translates to the client capture again.
        #[arg(long, conflicts_with = "deterministic")]
        setup: Option<PathBuf>,
        /// The captured stream; standard input when absent.
        file: Option<PathBuf>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
    /// Print the man page of babelgate (roff, for `man -l -`).
    Man,
    /// Print the JSON Schema of gateway.toml (what editors validate it with).
    Schema,
}

/// `--from-transport` / `--to-transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TransportArg {
    Sse,
    Proto,
}

impl TransportArg {
    /// The transport for `dialect`, or the usage error.
    fn of(self, dialect: Dialect, flag: &str) -> Result<Transport, String> {
        match self {
            TransportArg::Sse => Ok(Transport::Sse),
            TransportArg::Proto => Transport::proto_for(&registry::policy(dialect))
                .ok_or_else(|| format!("{flag} proto: {dialect} has no binary transport")),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve {
            config,
            listen,
            log_json,
        } => serve(config, listen, log_json),
        Command::Completions { shell } => {
            use clap_complete::Generator;
            let mut cmd = Cli::command();
            cmd.set_bin_name("babelgate");
            cmd.build();
            // `try_`: a closed pipe (`| head`) is an error to report, not a panic.
            match shell.try_generate(&cmd, &mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("babelgate: {e}");
                    ExitCode::from(1)
                }
            }
        }
        // The page lists the commands; `babelgate <command> --help` has each one's options.
        Command::Man => {
            match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("babelgate: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Schema => {
            let schema = babelgate::config::schema();
            match serde_json::to_string_pretty(&schema) {
                Ok(text) => {
                    println!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("babelgate: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Check { config } => match Config::load(&config) {
            Ok(c) => {
                println!("{}: ok ({} routes)", config.display(), c.routes.len());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(1)
            }
        },
        Command::DemoAgent {
            protocol,
            listen,
            delay_ms,
        } => process::runtime().block_on(async move {
            let listener = match tokio::net::TcpListener::bind(listen).await {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("babelgate: cannot listen on {listen}: {e}");
                    return ExitCode::from(1);
                }
            };
            eprintln!("demo agent speaking {protocol} on http://{listen}/agent");
            tokio::select! {
                _ = demo::serve(listener, protocol, Duration::from_millis(delay_ms)) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            ExitCode::SUCCESS
        }),
        Command::Translate {
            from,
            to,
            max_event_bytes,
            deterministic,
            from_transport,
            to_transport,
            setup,
            file,
        } => {
            let transports = from_transport
                .of(from, "--from-transport")
                .and_then(|f| Ok((f, to_transport.of(to, "--to-transport")?)));
            let replay = match setup.map(|p| read_setup(&p, from, to, transports.clone())) {
                None => None,
                Some(Ok(r)) => Some(r),
                Some(Err(e)) => {
                    eprintln!("babelgate: {e}");
                    return ExitCode::from(2);
                }
            };
            let ctx = match (&replay, deterministic) {
                (Some(r), _) => r.setup.context(),
                (None, true) => EncodeContext::deterministic(),
                (None, false) => EncodeContext::default(),
            };
            match transports {
                Ok(t) => translate(
                    from,
                    to,
                    max_event_bytes,
                    ctx,
                    t,
                    file,
                    replay.map(|r| (r.ending, r.clock)),
                ),
                Err(e) => {
                    eprintln!("babelgate: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

/// Streams input to output, flushing after every chunk so each event leaves as
/// soon as it is produced (useful on a pipe from a live capture).
fn translate(
    from: Dialect,
    to: Dialect,
    max_event_bytes: usize,
    ctx: EncodeContext,
    (from_transport, to_transport): (Transport, Transport),
    file: Option<PathBuf>,
    replay: Option<(Ending, Vec<(usize, i64)>)>,
) -> ExitCode {
    let (ending, clock) = match replay {
        Some((ending, clock)) => (Some(ending), clock),
        None => (None, Vec::new()),
    };
    // A capture's times, given to the encoder where the live one got them.
    let mut timed = babelgate::inspector::Timed::new(&clock);
    // The translator reads and writes the transports itself.
    let mut tr = transport::translator(
        from,
        to,
        ctx,
        max_event_bytes,
        from_transport,
        (to_transport, false),
    );
    let mut input: Box<dyn Read> = match &file {
        Some(path) => match std::fs::File::open(path) {
            Ok(f) => Box::new(f),
            Err(e) => {
                eprintln!("babelgate: cannot open {}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
        None => Box::new(io::stdin().lock()),
    };
    let name = file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "<stdin>".to_string());
    let stdout = io::stdout();
    let mut stdout = stdout.lock();
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(64 * 1024);
    let result = loop {
        let n = match input.read(&mut buf) {
            Ok(0) => {
                timed.end(&mut tr);
                break match &ending {
                    // The live stream's client went away: it just stopped.
                    Some(Ending::Cut) => Ok(()),
                    Some(Ending::Fail { message, code }) => {
                        tr.fail(message, code.as_deref(), &mut out);
                        Ok(())
                    }
                    _ => tr.finish(&mut out),
                };
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("babelgate: reading {name}: {e}");
                tr.fail(
                    &format!("input read error: {e}"),
                    Some("input_error"),
                    &mut out,
                );
                let _ = write_out(&mut stdout, &mut out);
                return ExitCode::from(1);
            }
        };
        let chunk = buf.get(..n).unwrap_or_default();
        let r = timed.push(&mut tr, chunk, |tr, piece| tr.push(piece, &mut out));
        if write_out(&mut stdout, &mut out).is_err() {
            return ExitCode::from(1); // the reader went away (broken pipe)
        }
        if r.is_err() {
            break r;
        }
    };
    let _ = write_out(&mut stdout, &mut out);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("babelgate: {name}: {e}");
            ExitCode::from(1)
        }
    }
}

/// Reads an inspector setup file and checks it is for this translation.
fn read_setup(
    path: &std::path::Path,
    from: Dialect,
    to: Dialect,
    transports: Result<(Transport, Transport), String>,
) -> Result<ReplaySetup, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let r: ReplaySetup = serde_json::from_slice(&text)
        .map_err(|e| format!("{}: not a capture setup: {e}", path.display()))?;
    if r.from != from || r.to != to {
        return Err(format!(
            "{}: the capture is {} to {}, not {from} to {to}",
            path.display(),
            r.from,
            r.to
        ));
    }
    if transports? != r.transports() {
        return Err(format!(
            "{}: the capture was read as {} and written as {}: say so with --from-transport/--to-transport",
            path.display(),
            r.from_transport,
            r.to_transport
        ));
    }
    Ok(r)
}

fn write_out(w: &mut impl Write, out: &mut Vec<u8>) -> io::Result<()> {
    if !out.is_empty() {
        w.write_all(out)?;
        w.flush()?;
        out.clear();
    }
    Ok(())
}

fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BABELGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour codes only for a person at a terminal, not in a file or a
    // log collector's pipe.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
        .with_writer(io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn serve(path: PathBuf, listen: Option<SocketAddr>, log_json: bool) -> ExitCode {
    let config = match Config::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    init_tracing(log_json || config.log_format == LogFormat::Json);
    process::reserve_descriptors(config.max_connections);
    process::return_freed_memory();
    process::runtime().block_on(async move {
        let addr = listen.unwrap_or(config.listen);
        if let Some(demo) = config.demo_agent.clone() {
            match tokio::net::TcpListener::bind(demo.listen).await {
                Ok(l) => {
                    tracing::info!(listen = %demo.listen, protocol = %demo.protocol, "demo agent started");
                    tokio::spawn(demo::serve(l, demo.protocol, demo.delay));
                }
                Err(e) => {
                    eprintln!("babelgate: demo agent cannot listen on {}: {e}", demo.listen);
                    return ExitCode::from(1);
                }
            }
        }
        let tls = match config.tls.as_ref().map(babelgate::tls::acceptor).transpose() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("babelgate: TLS: {e}");
                return ExitCode::from(1);
            }
        };
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("babelgate: cannot listen on {addr}: {e}");
                return ExitCode::from(1);
            }
        };
        log_routes(&config);
        let stores = match babelgate::server::store_config(&config).build().await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("babelgate: store: {e}");
                return ExitCode::from(1);
            }
        };
        match stores.ping().await {
            Ok(()) => {}
            // `redis` on a cluster node: not fatal either, but said loudly.
            Err(e @ babelgate_store::StoreError::Config(_)) => {
                tracing::error!(error = %e, "the store is misconfigured");
            }
            // Not fatal: /readyz says so and service starts when it is back.
            Err(e) => tracing::warn!(error = %e, "the store does not answer yet"),
        }
        let gateway = match Gateway::with_stores(config, stores) {
            Ok(g) => Arc::new(g),
            Err(e) => {
                eprintln!("babelgate: {e}");
                return ExitCode::from(1);
            }
        };
        let _ = process::when_quiet::GATEWAY.set(Arc::downgrade(&gateway));
        let scheme = if tls.is_some() { "https" } else { "http" };
        tracing::info!(%addr, %scheme, "babelgate listening");
        tokio::spawn(watch_config(gateway.clone(), path));
        gateway.serve_until(listener, tls, shutdown_signal()).await;
        tracing::info!("stopped");
        ExitCode::SUCCESS
    })
}

fn log_routes(config: &Config) {
    for r in &config.routes {
        // Upstream headers may hold secrets: only their names are logged;
        // the URL without its userinfo and query.
        let headers: Vec<&str> = r.upstream_headers.iter().map(|(k, _)| k.as_str()).collect();
        let upstream = babelgate::server::loggable_url(&r.upstream);
        let auth = match &r.auth {
            None => "none",
            Some(a) if a.jwt.is_some() => "bearer+jwt",
            Some(_) => "bearer",
        };
        tracing::info!(path = %r.path, client = %r.client, %upstream, upstream_protocol = %r.upstream_protocol, auth, ?headers, "route");
    }
}

/// SIGTERM or ctrl-c.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutdown requested: no new connections; open streams may finish");
}

/// Reloads the routes on SIGHUP and when the file changes. A file that does
/// not check is refused: the running routes stay, and the reasons are logged.
async fn watch_config(gateway: Arc<Gateway>, path: PathBuf) {
    let stamp = |p: &PathBuf| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.modified().ok(), m.len()))
    };
    let mut last = stamp(&path);
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        #[cfg(unix)]
        let by_signal = async {
            match hup.as_mut() {
                Some(h) => {
                    h.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let by_signal = std::future::pending::<()>();
        let why = tokio::select! {
            () = by_signal => "SIGHUP",
            _ = tick.tick() => {
                let now = stamp(&path);
                if now == last {
                    continue;
                }
                last = now;
                "file changed"
            }
        };
        match Config::load(&path) {
            Ok(config) => {
                let routes = config.routes.len();
                let max_connections = config.max_connections;
                log_routes(&config);
                match gateway.reload(config) {
                    Ok(()) => {
                        // A raised `max_connections` gets its room now, as
                        // at start, rather than a growth per doubling as
                        // connections arrive. Off the workers: the growth
                        // waits for an RCU grace period.
                        drop(tokio::task::spawn_blocking(move || {
                            process::reserve_descriptors(max_connections)
                        }));
                        tracing::info!(why, routes, "configuration reloaded")
                    }
                    Err(e) => {
                        tracing::error!(why, error = %e, "reload refused; the running configuration stays")
                    }
                }
            }
            Err(e) => {
                for err in &e.errors {
                    tracing::error!(why, file = %e.file, line = err.line, column = err.column, error = %err.message, "reload refused; the running configuration stays");
                }
            }
        }
    }
}

#[cfg(all(test, not(target_env = "msvc")))]
mod tests {
    use tikv_jemalloc_ctl::{Access, AsName};

    fn read(name: &str) -> usize {
        format!("{name}\0").as_bytes().name().read().unwrap()
    }

    /// The build carries `.cargo/config.toml`'s jemalloc options: each size
    /// class's slab is 8 pages, or as near as jemalloc allows (a slab holds
    /// 1 to 512 objects of its size).
    #[test]
    fn small_objects_share_slabs_of_eight_pages() {
        let page = read("arenas.page");
        let bins: u32 = b"arenas.nbins\0".name().read().unwrap();
        assert!(bins > 30, "{bins} size classes");
        for i in 0..bins {
            let size = read(&format!("arenas.bin.{i}.size"));
            let slab = read(&format!("arenas.bin.{i}.slab_size"));
            let pages = 8.clamp(size.div_ceil(page), 512 * size / page);
            assert_eq!(slab, pages * page, "objects of {size} bytes");
        }
    }
}
