//! Holds docs/mapping.md to the code.
//!
//! - The overview table has one row per core event kind (`EventKind::NAMES`),
//!   and names no kind that does not exist.
//! - Each dialect's section ("## From <Dialect> (`<dialect>`)") has a row for
//!   every wire event type found in the golden fixtures
//!   `tests/fixtures/<dialect>/*.sse`: the first code span of the row's first
//!   cell is the type (`data-<name>` stands for any `data-` type). A type with
//!   no row of its own is covered by the section's "any other ..." row only if
//!   the decoder really turned it into `unknown`. A row's core column must name
//!   at least one of the core events the decoder produced for that frame.
//! - Every table row has the section's number of columns (an unescaped `|`
//!   inside a cell would shift them).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use babelgate::registry;
use babelgate_core::testing::{self, sse_frames};
use babelgate_core::{Dialect, EventKind};
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn mapping_doc() -> String {
    let path = repo_root().join("docs/mapping.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The lines of the first `## ` section whose heading satisfies `pick`, up to
/// the next `## ` heading.
fn section(doc: &str, pick: impl Fn(&str) -> bool) -> Option<Vec<&str>> {
    let mut lines = doc.lines();
    lines.by_ref().find(|l| l.starts_with("## ") && pick(l))?;
    Some(lines.take_while(|l| !l.starts_with("## ")).collect())
}

/// Cells of a Markdown table row; `\|` is a literal pipe inside a cell.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim();
    let inner = inner.strip_prefix('|').unwrap_or(inner);
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                out.last_mut().unwrap().push('|');
            }
            '|' => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out.into_iter().map(|c| c.trim().to_string()).collect()
}

/// The body rows of every table in `lines` (header and separator rows left out).
fn table_rows(lines: &[&str]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in lines {
        if !line.trim_start().starts_with('|') {
            in_table = false;
            continue;
        }
        if !in_table {
            // The header row of a new table.
            in_table = true;
            continue;
        }
        let row = cells(line);
        let separator = row
            .iter()
            .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':')));
        if !separator {
            rows.push(row);
        }
    }
    rows
}

/// The contents of the code spans (`...`) in a cell.
fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Core kind names a cell mentions: the leading `[a-z_]` run of each code span
/// (`data{name, id}` names `data`).
fn kinds_named(cell: &str) -> BTreeSet<String> {
    code_spans(cell)
        .iter()
        .map(|s| {
            s.chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect::<String>()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether a documented type (possibly a `prefix<name>suffix` pattern) covers
/// the wire type `ty`.
fn covers(pattern: &str, ty: &str) -> bool {
    if let Some(open) = pattern.find('<') {
        if let Some(close) = pattern[open..].find('>') {
            let prefix = &pattern[..open];
            let suffix = &pattern[open + close + 1..];
            return ty.len() > prefix.len() + suffix.len()
                && ty.starts_with(prefix)
                && ty.ends_with(suffix);
        }
    }
    pattern == ty
}

fn is_catch_all(row: &[String]) -> bool {
    row[0].starts_with("any other")
}

/// The wire type a row documents: the first code span of its first cell.
fn row_type(row: &[String]) -> Option<String> {
    if is_catch_all(row) {
        return None;
    }
    code_spans(&row[0]).into_iter().next()
}

/// How a fixture frame is identified in the doc.
#[derive(Debug)]
enum WireKind {
    Type(String),
    /// Data that is not JSON (AG-Kit `keep-alive`).
    NotJson,
    /// JSON that is not an object with a string `type`.
    Untyped,
}

fn wire_kind(data: &str) -> WireKind {
    match serde_json::from_str::<Value>(data) {
        Err(_) => WireKind::NotJson,
        Ok(Value::Object(o)) => match o.get("type") {
            Some(Value::String(t)) => WireKind::Type(t.clone()),
            _ => WireKind::Untyped,
        },
        Ok(_) => WireKind::Untyped,
    }
}

#[test]
fn overview_has_a_row_per_core_event_kind() {
    let doc = mapping_doc();
    let lines = section(&doc, |h| h.starts_with("## Overview"))
        .expect("docs/mapping.md has no `## Overview` section");
    let rows = table_rows(&lines);
    let mut problems = Vec::new();
    let mut documented = BTreeSet::new();
    for row in &rows {
        if row.len() != 5 {
            problems.push(format!(
                "overview row has {} cells instead of 5: {}",
                row.len(),
                row.join(" | ")
            ));
        }
        documented.extend(code_spans(&row[0]));
    }
    for name in EventKind::NAMES {
        if !documented.contains(name) {
            problems.push(format!(
                "core event kind `{name}` has no row in the overview table of docs/mapping.md"
            ));
        }
    }
    for name in &documented {
        if !EventKind::NAMES.contains(&name.as_str()) {
            problems.push(format!(
                "the overview table of docs/mapping.md has a row for `{name}`, which is no core event kind"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_fixture_event_type_has_a_row_in_its_dialect_section() {
    let doc = mapping_doc();
    let mut problems = Vec::new();
    for dialect in Dialect::ALL {
        let marker = format!("(`{}`)", dialect.as_str());
        let Some(lines) = section(&doc, |h| h.starts_with("## From ") && h.contains(&marker))
        else {
            problems.push(format!(
                "docs/mapping.md has no `## From ... {marker}` section"
            ));
            continue;
        };
        let rows = table_rows(&lines);
        for row in &rows {
            if row.len() != 7 {
                problems.push(format!(
                    "{dialect}: row has {} cells instead of 7: {}",
                    row.len(),
                    row.join(" | ")
                ));
            }
        }
        let rows: Vec<&Vec<String>> = rows.iter().filter(|r| r.len() >= 2).collect();
        let catch_all: Vec<&Vec<String>> =
            rows.iter().copied().filter(|r| is_catch_all(r)).collect();

        for (stem, bytes) in testing::fixtures(dialect.as_str()) {
            let name = format!("tests/fixtures/{dialect}/{stem}.sse");
            let mut decoder = registry::decoder(dialect);
            for frame in sse_frames(&bytes) {
                if frame.data.trim().is_empty() || frame.is_done() {
                    continue;
                }
                let mut produced = Vec::new();
                if let Err(e) = decoder.decode(&frame, &mut produced) {
                    problems.push(format!(
                        "{name}:{}: the {dialect} decoder refused a fixture frame: {e}",
                        frame.line
                    ));
                    continue;
                }
                let produced: BTreeSet<String> =
                    produced.iter().map(|e| e.kind.name().to_string()).collect();
                let kind = wire_kind(&frame.data);
                let (label, matching): (String, Vec<&Vec<String>>) = match &kind {
                    WireKind::Type(ty) => {
                        let own: Vec<&Vec<String>> = rows
                            .iter()
                            .copied()
                            .filter(|r| row_type(r).is_some_and(|p| covers(&p, ty)))
                            .collect();
                        if own.is_empty() && produced.contains("unknown") {
                            (format!("`{ty}`"), catch_all.clone())
                        } else {
                            (format!("`{ty}`"), own)
                        }
                    }
                    WireKind::NotJson => (
                        format!("non-JSON data {:?}", frame.data),
                        rows.iter()
                            .copied()
                            .filter(|r| r[0].contains("not JSON"))
                            .collect(),
                    ),
                    WireKind::Untyped => (
                        "JSON without a string `type`".to_string(),
                        rows.iter()
                            .copied()
                            .filter(|r| r[0].contains("without `type`"))
                            .collect(),
                    ),
                };
                if matching.is_empty() {
                    problems.push(format!(
                        "{name}:{}: the \"From {dialect}\" section of docs/mapping.md has no row for {label}",
                        frame.line
                    ));
                    continue;
                }
                if produced.is_empty() {
                    // Held back (HAI BUSINESS_DATA_START, approval requests,
                    // AG-Kit interrupts) or swallowed (Vercel's closing chunks
                    // after an error): nothing to compare.
                    continue;
                }
                let named: BTreeSet<String> =
                    matching.iter().flat_map(|r| kinds_named(&r[1])).collect();
                if produced.is_disjoint(&named) {
                    problems.push(format!(
                        "{name}:{}: the \"From {dialect}\" row for {label} names core events {named:?}, \
                         but the decoder produced {produced:?}",
                        frame.line
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The ids of `id: '...'` entries in tests/node/oracle/deliberate.mjs.
fn oracle_deliberate_ids() -> BTreeSet<String> {
    let path = repo_root().join("tests/node/oracle/deliberate.mjs");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split("id: '")
        .skip(1)
        .filter_map(|rest| rest.split('\'').next())
        .map(str::to_string)
        .collect()
}

/// Every difference an oracle test allows has a row saying why, and every row
/// is one a test allows by that id (a stale row would claim a difference no
/// test holds).
#[test]
fn every_deliberate_difference_is_explained_and_held_by_a_test() {
    let doc = mapping_doc();
    let lines = section(&doc, |h| h.starts_with("## Deliberate differences"))
        .expect("a \"## Deliberate differences\" section");
    let rows = table_rows(&lines);
    assert!(rows.len() >= 10, "{} rows", rows.len());
    let mut documented = BTreeSet::new();
    for row in &rows {
        assert_eq!(row.len(), 5, "{row:?}");
        let id = code_spans(&row[0]).into_iter().next().expect("an id");
        let held_by = code_spans(&row[4]).into_iter().next().expect("a file");
        let text = std::fs::read_to_string(repo_root().join(&held_by))
            .unwrap_or_else(|e| panic!("{id}: held by {held_by}: {e}"));
        let named = if held_by.ends_with("deliberate.mjs") {
            text.contains(&format!("id: '{id}'"))
        } else {
            text.contains(&format!("`{id}`"))
        };
        assert!(named, "{id}: {held_by} does not name it");
        assert!(!row[3].is_empty(), "{id}: no reason");
        documented.insert(id);
    }
    let allowed = oracle_deliberate_ids();
    assert!(!allowed.is_empty());
    let missing: Vec<_> = allowed.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "allowed by the oracle tests, not in docs/mapping.md: {missing:?}"
    );
}

#[test]
fn table_helpers_read_the_doc_conventions() {
    assert_eq!(
        cells(r"| `a` | b \| c | d |"),
        vec!["`a`".to_string(), "b | c".into(), "d".into()]
    );
    assert!(covers("data-<name>", "data-weather"));
    assert!(!covers("data-<name>", "data-"));
    assert!(!covers("data-<name>", "text-delta"));
    assert!(covers("TEXT_MESSAGE_START", "TEXT_MESSAGE_START"));
    assert_eq!(
        kinds_named("[`text_start{agkit-text-N}`], `text_delta` (`{type:\"x\"}`)"),
        ["text_start", "text_delta"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}

/// docs/mapping.md, "Client-declared tools, pair by pair": for each upstream
/// dialect, whether the request built for it carries a tool the client
/// declared, as the table's right-hand column says ("yes" or "no").
#[test]
fn client_tools_reach_the_upstream_request_as_the_table_says() {
    let doc = mapping_doc();
    let section = doc
        .split("### Client-declared tools, pair by pair")
        .nth(1)
        .expect("the section is there");
    let request: babelgate_core::RunRequest = serde_json::from_value(serde_json::json!({
        "thread_id": "t-1",
        "run_id": "r-1",
        "messages": [{"id": "m-1", "role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "tools": [{"name": "page_tool_x", "description": "d", "parameters": {"type": "object"}}],
    }))
    .expect("a run request");
    let mut seen = 0;
    for row in section.lines().take_while(|l| !l.starts_with("##")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let names = [
            ("AG-UI", Dialect::AgUi),
            ("HAI", Dialect::Hai),
            ("Vercel", Dialect::Vercel),
            ("AG-Kit", Dialect::AgKit),
            ("A2A", Dialect::A2a),
        ];
        let Some(&(_, dialect)) = names.iter().find(|(n, _)| cells.get(1) == Some(n)) else {
            continue;
        };
        let says = cells.get(3).expect("a third column");
        let carried = registry::requests(dialect)
            .build_request(&request)
            .expect("the request builds")
            .to_string()
            .contains("page_tool_x");
        assert_eq!(
            carried,
            says.starts_with("yes"),
            "{dialect:?}: the doc says {says:?}"
        );
        seen += 1;
    }
    assert_eq!(seen, Dialect::ALL.len(), "a row per dialect");
}
