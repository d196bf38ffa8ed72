//! The crate's top-level modules form layers: no two of them import each
//! other. Reads `src/` as text (each `crate::<module>` path outside
//! comments, in a file of another top-level module), so a tie that comes
//! back fails here with the files that make it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Each top-level module's imports of the others: module → (imported
/// module → the files that import it).
type Imports = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`lib` for `lib.rs`).
fn module_of(relative: &Path) -> String {
    let first = relative
        .components()
        .next()
        .expect("a path inside src/")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.strip_suffix(".rs").unwrap_or(&first).to_owned()
}

/// The modules `text` names as `crate::<module>`, comments left out.
fn named_modules(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
            rest = after;
        }
    }
    found
}

fn imports() -> Imports {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph = Imports::new();
    for file in files {
        let relative = file.strip_prefix(&src).expect("inside src/");
        let from = module_of(relative);
        let text = fs::read_to_string(&file).expect("a readable source file");
        for to in named_modules(&text) {
            if to != from && from != "lib" && from != "bin" {
                graph
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(relative.display().to_string());
            }
        }
    }
    graph
}

#[test]
fn no_two_top_level_modules_import_each_other() {
    let graph = imports();
    let mut ties = Vec::new();
    for (a, theirs) in &graph {
        for (b, files) in theirs {
            let back = graph.get(b).and_then(|m| m.get(a));
            if let (true, Some(back)) = (a < b, back) {
                ties.push(format!("{a} ↔ {b}: {files:?} and {back:?}"));
            }
        }
    }
    assert!(ties.is_empty(), "two-way ties:\n{}", ties.join("\n"));
}

#[test]
fn the_scan_sees_imports_and_ignores_comments() {
    let text = "use crate::engine::client::Client;\n\
                // crate::gateway is only mentioned\n\
                let x = crate::fleet::Journal::default(); // crate::sim\n";
    let found: Vec<String> = named_modules(text).into_iter().collect();
    assert_eq!(found, ["engine", "fleet"]);
    // The graph is not empty: the scan reads the tree.
    let graph = imports();
    assert!(graph["gateway"].contains_key("engine"), "{graph:?}");
}
