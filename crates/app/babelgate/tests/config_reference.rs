//! docs/configuration.md documents exactly the keys gateway.toml accepts,
//! table by table, and the shipped gateway.schema.json is the schema the
//! code makes. Both are derived from the raw types `check` reads the file
//! into (`babelgate::config::schema()`), so neither can drift from it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

type Tables = BTreeMap<String, BTreeSet<String>>;

fn repo(path: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../..")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn resolve<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.strip_prefix("#/$defs/").expect("a local $ref");
            resolve(root, &root["$defs"][name])
        }
        None => s,
    }
}

/// Each table of the file (as TOML writes its header: `[server]`,
/// `[[routes]]`, `[routes.auth]`) with the keys that are values in it; a key
/// whose value is a table of known keys is a table of its own.
fn schema_tables(root: &Value, schema: &Value, prefix: &str, out: &mut Tables) {
    for (key, s) in schema["properties"].as_object().expect("properties") {
        let s = resolve(root, s);
        let name = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        if s.get("properties").is_some() {
            out.entry(format!("[{name}]")).or_default();
            schema_tables(root, s, &name, out);
        } else if s["type"] == "array" && resolve(root, &s["items"]).get("properties").is_some() {
            out.entry(format!("[[{name}]]")).or_default();
            schema_tables(root, resolve(root, &s["items"]), &name, out);
        } else {
            let table = out
                .keys()
                .find(|t| t.trim_matches(['[', ']']) == prefix)
                .cloned()
                .unwrap_or_else(|| panic!("a value key `{name}` outside any table"));
            out.get_mut(&table).unwrap().insert(key.clone());
        }
    }
}

/// The page's tables: a heading names one or more tables in backticks
/// (`` ### `[routes.auth]` and `[inspector.auth]` ``); each row of the
/// table that follows it starts with its key in backticks.
fn documented_tables(doc: &str) -> Tables {
    let mut out = Tables::new();
    let mut current: Vec<String> = Vec::new();
    let mut in_code = false;
    for line in doc.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if in_code {
        } else if line.starts_with('#') {
            current = line
                .split('`')
                .skip(1)
                .step_by(2)
                .filter(|s| s.starts_with('[') && s.ends_with(']'))
                .map(String::from)
                .collect();
            for t in &current {
                out.entry(t.clone()).or_default();
            }
        } else if let Some(row) = line.strip_prefix("| `") {
            let key = row.split('`').next().unwrap();
            for t in &current {
                out.get_mut(t).unwrap().insert(key.to_string());
            }
        }
    }
    out
}

#[test]
fn the_configuration_page_names_every_key_and_no_other() {
    let schema = babelgate::config::schema();
    let mut code = Tables::new();
    schema_tables(&schema, &schema, "", &mut code);
    // The sanity of the walk itself: tables and keys known to exist.
    assert!(code["[[routes]]"].contains("upstream_protocol"));
    assert!(code["[routes.auth.jwt]"].contains("jwks_url"));
    assert!(code["[server]"].contains("trusted_proxies"));

    let doc = documented_tables(&repo("docs/configuration.md"));
    let mut problems = Vec::new();
    for table in code.keys().chain(doc.keys()).collect::<BTreeSet<_>>() {
        let (c, d) = (code.get(table), doc.get(table));
        match (c, d) {
            (Some(_), None) => problems.push(format!("{table}: no section on the page")),
            (None, Some(_)) => problems.push(format!("{table}: on the page, not in the code")),
            (Some(c), Some(d)) => {
                for k in c.difference(d) {
                    problems.push(format!("{table} {k}: accepted, not documented"));
                }
                for k in d.difference(c) {
                    problems.push(format!("{table} {k}: documented, not accepted"));
                }
            }
            (None, None) => unreachable!(),
        }
    }
    assert!(
        problems.is_empty(),
        "docs/configuration.md against the config code:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_page_check_catches_a_key_it_lacks_and_one_too_many() {
    let schema = babelgate::config::schema();
    let mut code = Tables::new();
    schema_tables(&schema, &schema, "", &mut code);
    let page = repo("docs/configuration.md");
    let dropped = page.replace("| `max_followers` |", "| max_followers |");
    let added = page.replace("| `listen` |", "| `listen` |\n| `listen_twice` | - | - |");
    for (what, text) in [("dropped", dropped), ("added", added)] {
        assert_ne!(
            documented_tables(&text),
            code,
            "a key {what} goes unnoticed"
        );
    }
}

#[test]
fn the_shipped_schema_is_the_one_the_code_makes() {
    let shipped: Value = serde_json::from_str(&repo("gateway.schema.json")).unwrap();
    assert!(
        shipped == babelgate::config::schema(),
        "gateway.schema.json is stale: cargo run -p babelgate -- schema > gateway.schema.json"
    );
}

#[test]
fn babelgate_schema_prints_the_shipped_schema() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_babelgate"))
        .arg("schema")
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let shipped: Value = serde_json::from_str(&repo("gateway.schema.json")).unwrap();
    assert!(
        printed == shipped,
        "`babelgate schema` is not gateway.schema.json"
    );
}

#[test]
fn the_shipped_file_names_its_schema() {
    let first = repo("gateway.toml")
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    assert_eq!(first, "#:schema ./gateway.schema.json");
}
