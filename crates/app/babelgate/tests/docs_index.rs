//! docs/README.md lists every page of docs/, and every page it links exists.

use std::path::Path;

#[test]
fn the_docs_index_lists_every_page_and_nothing_else() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs");
    let index = std::fs::read_to_string(docs.join("README.md")).unwrap();
    let linked: Vec<&str> = index
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .collect();
    for link in &linked {
        assert!(
            docs.join(link).exists(),
            "docs/README.md links {link}, which is not there"
        );
    }
    for entry in std::fs::read_dir(&docs).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") && name != "README.md" {
            assert!(
                linked.contains(&name.as_str()),
                "docs/README.md does not list {name}"
            );
        }
    }
}
