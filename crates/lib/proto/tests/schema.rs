//! The vendored schema against what @ag-ui/proto 1.0.0 was really built from.
//! Its generated code (read from the package's source map by
//! tests/node/proto-corpus.mjs into testdata/dist-fields.txt) lists every field
//! it writes with its number and wire type; the compiled .proto must list the
//! same, no more and no less.

use prost::Message;
use prost_types::field_descriptor_proto::Type;
use prost_types::{DescriptorProto, FileDescriptorSet};
use std::collections::BTreeSet;

fn camel(name: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in name.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn walk(prefix: &str, m: &DescriptorProto, out: &mut BTreeSet<String>) {
    let name = if prefix.is_empty() {
        m.name().to_string()
    } else {
        format!("{prefix}.{}", m.name())
    };
    for f in &m.field {
        let wire = match f.r#type() {
            Type::Double | Type::Fixed64 | Type::Sfixed64 => 1,
            Type::String | Type::Bytes | Type::Message => 2,
            Type::Float | Type::Fixed32 | Type::Sfixed32 => 5,
            _ => 0,
        };
        out.insert(format!("{name} {} {} {wire}", camel(f.name()), f.number()));
    }
    for n in &m.nested_type {
        walk(&name, n, out);
    }
}

#[test]
fn field_layout_matches_the_packages_generated_code() {
    let set = FileDescriptorSet::decode(babelgate_proto::DESCRIPTOR_SET).unwrap();
    let mut ours = BTreeSet::new();
    for file in &set.file {
        let prefix = if file.package() == "google.protobuf" {
            "google.protobuf"
        } else {
            ""
        };
        for m in &file.message_type {
            walk(prefix, m, &mut ours);
        }
    }
    // Only the well-known types the schema uses are in the package.
    ours.retain(|l| {
        !l.starts_with("google.protobuf.")
            || l.starts_with("google.protobuf.Struct")
            || l.starts_with("google.protobuf.Value")
            || l.starts_with("google.protobuf.ListValue")
    });
    let theirs: BTreeSet<String> = include_str!("../testdata/dist-fields.txt")
        .lines()
        .map(str::to_string)
        .collect();
    assert!(theirs.len() > 250);
    let missing: Vec<_> = theirs.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&theirs).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "not in our schema: {missing:#?}\nnot in 1.0.0: {extra:#?}"
    );
}

#[test]
fn event_type_numbers_match_the_package() {
    // 1.0.0 numbers the subagent events 16-18 (the ag-ui snapshot's schema at
    // 0adad8bd8 has them at 28-30): the enum value travels in every event.
    use babelgate_proto::pb::EventType;
    assert_eq!(EventType::SubagentStarted as i32, 16);
    assert_eq!(EventType::TextMessageChunk as i32, 19);
    assert_eq!(EventType::ReasoningEncryptedValue as i32, 30);
}
