//! `babelgate`: serve routes, translate captured streams, run the demo agent.
#![forbid(unsafe_code)]

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use babelgate::registry;
use babelgate_core::sse::DEFAULT_MAX_EVENT_BYTES;
use babelgate_core::{Dialect, EncodeContext};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "babelgate", version, about = "Any agent UI to any agent backend, whatever streaming dialect each speaks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
        /// The captured stream; standard input when absent.
        file: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Translate {
            from,
            to,
            max_event_bytes,
            deterministic,
            file,
        } => translate(from, to, max_event_bytes, deterministic, file),
    }
}

/// Streams input to output, flushing after every chunk so each event leaves as
/// soon as it is produced (useful on a pipe from a live capture).
fn translate(
    from: Dialect,
    to: Dialect,
    max_event_bytes: usize,
    deterministic: bool,
    file: Option<PathBuf>,
) -> ExitCode {
    let ctx = if deterministic {
        EncodeContext::deterministic()
    } else {
        EncodeContext::default()
    };
    let mut tr = registry::translator(from, to, ctx, max_event_bytes);
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
            Ok(0) => break tr.finish(&mut out),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("babelgate: reading {name}: {e}");
                tr.fail(&format!("input read error: {e}"), Some("input_error"), &mut out);
                let _ = stdout.write_all(&out).and_then(|_| stdout.flush());
                return ExitCode::from(1);
            }
        };
        let r = tr.push(&buf[..n], &mut out);
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

fn write_out(w: &mut impl Write, out: &mut Vec<u8>) -> io::Result<()> {
    if !out.is_empty() {
        w.write_all(out)?;
        w.flush()?;
        out.clear();
    }
    Ok(())
}
